package vhostuser

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"

	"golang.org/x/sys/unix"
)

// scmMaxFD is the kernel's SCM_MAX_FD: the most fds one sendmsg can carry.
// ReadMessage makes room for that many so that none is dropped unseen,
// then closes every one of a message that carries more than MaxFDs.
const scmMaxFD = 253

// ReadMessage reads one message and the fds that came with its first
// bytes (SCM_RIGHTS) from a front-end. It bounds what it accepts before
// allocating: a payload of at most MaxPayload bytes and at most MaxFDs
// fds; a message over either limit, or with truncated control data, has
// every fd it brought closed and gives an error wrapping ErrInvalid (the
// stream is then out of step: close the connection). A connection closed
// between messages gives io.EOF, one closed inside a message
// io.ErrUnexpectedEOF. It does not check the payload against the request
// (Decode does). The caller owns the returned Message's FDs.
//
// Reads are sequential: do not call ReadMessage on one connection from two
// goroutines.
func ReadMessage(c *net.UnixConn) (*Message, error) {
	var hdr [HeaderSize]byte
	oob := make([]byte, unix.CmsgSpace(scmMaxFD*4))
	n, oobn, flags, _, err := c.ReadMsgUnix(hdr[:], oob)
	fds, perr := parseRights(oob[:oobn])
	m := &Message{FDs: fds}
	fail := func(err error) (*Message, error) {
		m.CloseFDs()
		return nil, err
	}
	if err != nil {
		if n == 0 && errors.Is(err, io.EOF) {
			return fail(io.EOF)
		}
		return fail(fmt.Errorf("vhost-user: read header: %w", err))
	}
	if n == 0 {
		return fail(io.EOF)
	}
	if perr != nil {
		return fail(fmt.Errorf("vhost-user: %w: %w", perr, ErrInvalid))
	}
	if flags&unix.MSG_CTRUNC != 0 {
		return fail(fmt.Errorf("vhost-user: control data truncated (more fds than %d): %w", scmMaxFD, ErrInvalid))
	}
	if n < HeaderSize {
		if _, err := io.ReadFull(c, hdr[n:]); err != nil {
			return fail(fmt.Errorf("vhost-user: read header: %w", unexpected(err)))
		}
	}
	le := binary.LittleEndian
	m.Header = Header{Request: Request(le.Uint32(hdr[0:])), Flags: Flags(le.Uint32(hdr[4:])), Size: le.Uint32(hdr[8:])}
	if m.Size > MaxPayload {
		return fail(fmt.Errorf("vhost-user: %v: payload of %d bytes, the most any request carries is %d: %w",
			m.Request, m.Size, MaxPayload, ErrInvalid))
	}
	if len(m.FDs) > MaxFDs {
		return fail(fmt.Errorf("vhost-user: %v: %d fds, the most any request carries is %d: %w",
			m.Request, len(m.FDs), MaxFDs, ErrInvalid))
	}
	m.Payload = make([]byte, m.Size)
	if _, err := io.ReadFull(c, m.Payload); err != nil {
		return fail(fmt.Errorf("vhost-user: %v: read %d-byte payload: %w", m.Request, m.Size, unexpected(err)))
	}
	return m, nil
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// parseRights returns every fd in the SCM_RIGHTS messages of oob. On a
// parse error it still returns the fds it found, for the caller to close.
func parseRights(oob []byte) ([]int, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("control message: %w", err)
	}
	var fds []int
	var first error
	for i := range msgs {
		if msgs[i].Header.Level != unix.SOL_SOCKET || msgs[i].Header.Type != unix.SCM_RIGHTS {
			if first == nil {
				first = fmt.Errorf("control message level %d type %d: only SCM_RIGHTS is expected",
					msgs[i].Header.Level, msgs[i].Header.Type)
			}
			continue
		}
		got, err := unix.ParseUnixRights(&msgs[i])
		if err != nil && first == nil {
			first = fmt.Errorf("SCM_RIGHTS: %w", err)
		}
		fds = append(fds, got...)
	}
	return fds, first
}

// WriteMessage writes m (header with len(m.Payload) as its size, payload
// and m.FDs as SCM_RIGHTS) in one sendmsg. It does not take ownership of
// the fds. It refuses, before writing, a payload over MaxPayload or more
// than MaxFDs fds (ErrInvalid).
func WriteMessage(c *net.UnixConn, m *Message) error {
	if len(m.Payload) > MaxPayload {
		return fmt.Errorf("vhost-user: %v: payload of %d bytes, at most %d: %w", m.Request, len(m.Payload), MaxPayload, ErrInvalid)
	}
	if len(m.FDs) > MaxFDs {
		return fmt.Errorf("vhost-user: %v: %d fds, at most %d: %w", m.Request, len(m.FDs), MaxFDs, ErrInvalid)
	}
	b := make([]byte, HeaderSize+len(m.Payload))
	le := binary.LittleEndian
	le.PutUint32(b[0:], uint32(m.Request))
	le.PutUint32(b[4:], uint32(m.Flags))
	le.PutUint32(b[8:], uint32(len(m.Payload)))
	copy(b[HeaderSize:], m.Payload)
	var oob []byte
	if len(m.FDs) > 0 {
		oob = unix.UnixRights(m.FDs...)
	}
	n, _, err := c.WriteMsgUnix(b, oob, nil)
	if err != nil {
		return fmt.Errorf("vhost-user: write %v: %w", m.Request, err)
	}
	if n != len(b) {
		return fmt.Errorf("vhost-user: write %v: %d of %d bytes: %w", m.Request, n, len(b), io.ErrShortWrite)
	}
	return nil
}

// NewMessage is a request (flags: version 1) with body b's encoding and
// the given fds, which stay the caller's.
func NewMessage(r Request, b Body, fds ...int) *Message {
	var p []byte
	if b != nil {
		p = b.Encode()
	}
	return &Message{Header: Header{Request: r, Flags: Version, Size: uint32(len(p))}, Payload: p, FDs: fds}
}

// NewReply is the back-end's reply to request r: flags version 1 | REPLY.
func NewReply(r Request, b Body) *Message {
	m := NewMessage(r, b)
	m.Flags |= FlagReply
	return m
}

// CloseFDs closes every fd of m and forgets them. Safe to call twice.
func (m *Message) CloseFDs() {
	for _, fd := range m.FDs {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	m.FDs = nil
}

// TakeFD returns the message's i-th fd and removes it from m, so that
// CloseFDs no longer closes it: the caller now owns it. It returns -1 when
// there is no such fd.
func (m *Message) TakeFD(i int) int {
	if i < 0 || i >= len(m.FDs) || m.FDs[i] < 0 {
		return -1
	}
	fd := m.FDs[i]
	m.FDs[i] = -1
	return fd
}
