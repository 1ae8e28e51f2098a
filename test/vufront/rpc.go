package vufront

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/netctl/netctl/vhostuser"
)

// ErrDisconnected: the Frontend has no connection (Disconnect, or the
// backend went away); Reconnect makes a new one.
var ErrDisconnected = errors.New("vufront: not connected to the backend")

// send writes one request with body and fds (the fds stay the caller's).
// With REPLY_ACK negotiated it sets NEED_REPLY and waits for the
// backend's u64 status (0: success), as Cloud Hypervisor does on every
// message; without it, nothing comes back.
func (f *Frontend) send(r vhostuser.Request, body vhostuser.Body, fds ...int) error {
	m := vhostuser.NewMessage(r, body, fds...)
	ack := f.proto.Has(vhostuser.ProtocolReplyAck)
	if ack {
		m.Flags |= vhostuser.FlagNeedReply
	}
	if err := f.write(m); err != nil {
		return err
	}
	if !ack {
		return nil
	}
	v, err := f.readU64(r)
	if err != nil {
		return err
	}
	if v != 0 {
		return fmt.Errorf("vufront: %v: the backend answered failure (%d)", r, v)
	}
	return nil
}

// get writes a request that always has a reply (GET_FEATURES,
// GET_PROTOCOL_FEATURES, GET_QUEUE_NUM) and returns the reply's u64.
func (f *Frontend) get(r vhostuser.Request) (uint64, error) {
	if err := f.write(vhostuser.NewMessage(r, nil)); err != nil {
		return 0, err
	}
	return f.readU64(r)
}

func (f *Frontend) write(m *vhostuser.Message) error {
	if f.conn == nil {
		return ErrDisconnected
	}
	f.conn.SetDeadline(time.Now().Add(f.cfg.Timeout))
	if err := vhostuser.WriteMessage(f.conn, m); err != nil {
		return fmt.Errorf("vufront: %w", err)
	}
	return nil
}

// reply reads the backend's reply to r and checks its header.
func (f *Frontend) reply(r vhostuser.Request, size int) ([]byte, error) {
	if f.conn == nil {
		return nil, ErrDisconnected
	}
	f.conn.SetDeadline(time.Now().Add(f.cfg.Timeout))
	m, err := vhostuser.ReadMessage(f.conn)
	if err != nil {
		return nil, fmt.Errorf("vufront: reply to %v: %w", r, err)
	}
	m.CloseFDs() // no reply the frontend reads carries fds
	switch {
	case m.Request != r:
		return nil, fmt.Errorf("vufront: reply to %v is a %v", r, m.Request)
	case m.Flags&vhostuser.FlagReply == 0 || m.Flags&vhostuser.VersionMask != vhostuser.Version:
		return nil, fmt.Errorf("vufront: reply to %v has flags %v, want v1|REPLY", r, m.Flags)
	case len(m.Payload) != size:
		return nil, fmt.Errorf("vufront: reply to %v has %d payload bytes, want %d", r, len(m.Payload), size)
	}
	return m.Payload, nil
}

func (f *Frontend) readU64(r vhostuser.Request) (uint64, error) {
	p, err := f.reply(r, vhostuser.U64Size)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(p), nil
}
