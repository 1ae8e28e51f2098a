package vufront

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"

	"github.com/netctl/netctl/vhostuser"
)

// Stub is a vhost-user backend that moves no packets: it answers the
// handshake (GET_FEATURES with Features, GET_PROTOCOL_FEATURES with
// Protocol, GET_QUEUE_NUM with Queues, GET_VRING_BASE with 0, SET_LOG_BASE
// and every NEED_REPLY with success) and records every message, for
// tests of a frontend (this package's, or QEMU's). It serves one
// connection at a time. It owns its listener; the fds that come with the
// messages are closed once recorded. Safe for concurrent use.
type Stub struct {
	Features uint64
	Protocol vhostuser.ProtocolFeatures
	Queues   uint64

	ln   *net.UnixListener
	done chan struct{}

	mu     sync.Mutex // guards log, err, notify
	log    []Recorded
	err    error
	notify chan struct{} // closed and replaced on every message
}

// Recorded is one message a frontend sent the Stub.
type Recorded struct {
	Conn  int // connection number, from 0
	Msg   vhostuser.Message
	Body  vhostuser.Body // Decode's, nil if it refused
	Err   error          // Decode's
	NFDs  int
	Regs  []vhostuser.MemRegion // SET_MEM_TABLE's regions
	Reply []byte                // the reply's payload, nil if none
}

// Seed is the message as vhostuser's FuzzDecode seeds lay it out: the fd
// count in one byte, then the 12-byte header and the payload.
func (r Recorded) Seed() []byte {
	b := []byte{byte(r.NFDs)}
	b = binary.LittleEndian.AppendUint32(b, uint32(r.Msg.Request))
	b = binary.LittleEndian.AppendUint32(b, uint32(r.Msg.Flags))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(r.Msg.Payload)))
	return append(b, r.Msg.Payload...)
}

// String is "SET_VRING_ADDR (v1|NEED_REPLY, 40 bytes, 0 fds) {Index:0 ...}".
func (r Recorded) String() string {
	m := r.Msg
	s := fmt.Sprintf("%v (%v, %d bytes, %d fds)", m.Request, m.Flags, len(m.Payload), r.NFDs)
	if r.Err != nil {
		return s + ": " + r.Err.Error()
	}
	if _, ok := r.Body.(vhostuser.Empty); !ok && r.Body != nil {
		s += fmt.Sprintf(" %+v", r.Body)
	}
	return s
}

// NewStub listens on socket (mode 0600) and serves in the background.
func NewStub(socket string, features uint64, proto vhostuser.ProtocolFeatures, queues uint64) (*Stub, error) {
	os.Remove(socket)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("vufront stub: %w", err)
	}
	os.Chmod(socket, 0o600)
	s := &Stub{Features: features, Protocol: proto, Queues: queues, ln: ln, done: make(chan struct{}), notify: make(chan struct{})}
	go s.serve()
	return s, nil
}

func (s *Stub) serve() {
	defer close(s.done)
	for n := 0; ; n++ {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			return // Close
		}
		err = s.conn(n, c) // never nil: it serves until the connection fails or ends
		c.Close()
		if !errors.Is(err, io.EOF) {
			s.fail(err)
		}
	}
}

func (s *Stub) conn(n int, c *net.UnixConn) error {
	var proto vhostuser.ProtocolFeatures
	for {
		m, err := vhostuser.ReadMessage(c)
		if err != nil {
			return err
		}
		r := Recorded{Conn: n, Msg: *m, NFDs: len(m.FDs)}
		r.Body, r.Err = vhostuser.Decode(m)
		m.CloseFDs()
		r.Msg.FDs = nil
		if t, ok := r.Body.(vhostuser.MemoryTable); ok {
			r.Regs = t.Regions
		}
		var reply vhostuser.Body
		switch m.Request {
		case vhostuser.GetFeatures:
			reply = vhostuser.U64(s.Features)
		case vhostuser.GetProtocolFeatures:
			reply = vhostuser.U64(s.Protocol)
		case vhostuser.GetQueueNum:
			reply = vhostuser.U64(s.Queues)
		case vhostuser.GetVringBase:
			if st, ok := r.Body.(vhostuser.VringState); ok {
				reply = vhostuser.VringState{Index: st.Index}
			}
		case vhostuser.SetLogBase:
			reply = vhostuser.U64(0)
		case vhostuser.SetProtocolFeatures:
			if v, ok := r.Body.(vhostuser.U64); ok {
				proto = vhostuser.ProtocolFeatures(v)
			}
		}
		if reply == nil && m.Flags&vhostuser.FlagNeedReply != 0 && proto.Has(vhostuser.ProtocolReplyAck) {
			reply = vhostuser.U64(0)
		}
		// Recorded before the reply goes out: a frontend that has its
		// reply finds the message in the log.
		var rm *vhostuser.Message
		if reply != nil {
			rm = vhostuser.NewReply(m.Request, reply)
			r.Reply = rm.Payload
		}
		s.add(r)
		if rm != nil {
			if err := vhostuser.WriteMessage(c, rm); err != nil {
				return err
			}
		}
	}
}

func (s *Stub) add(r Recorded) {
	s.mu.Lock()
	s.log = append(s.log, r)
	close(s.notify)
	s.notify = make(chan struct{})
	s.mu.Unlock()
}

func (s *Stub) fail(err error) {
	s.mu.Lock()
	s.err = err
	close(s.notify)
	s.notify = make(chan struct{})
	s.mu.Unlock()
}

// Log is every message so far, in order, and the first error serving
// them (a read or write failure other than the frontend closing).
func (s *Stub) Log() ([]Recorded, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Recorded(nil), s.log...), s.err
}

// Changed is closed at the next message.
func (s *Stub) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.notify
}

// WriteSeeds writes every recorded message to dir as a fuzz seed
// (Recorded.Seed), one file each, named NN-REQUEST.bin.
func (s *Stub) WriteSeeds(dir string) error {
	log, _ := s.Log()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i, r := range log {
		name := filepath.Join(dir, fmt.Sprintf("%03d-%v.bin", i, r.Msg.Request))
		if err := os.WriteFile(name, r.Seed(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Close stops listening and waits for the connection being served to
// end (close the frontend first). Idempotent.
func (s *Stub) Close() error {
	err := s.ln.Close()
	<-s.done
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
