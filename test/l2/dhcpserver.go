package l2

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
)

// Addresses the test DHCP server hands out (TEST-NET-1, RFC 5737).
var (
	DHCPServerIP  = netip.MustParseAddr("192.0.2.1")
	DHCPOfferIP   = netip.MustParseAddr("192.0.2.10")
	DHCPServerMAC = net.HardwareAddr{0x02, 0, 0, 0, 0x0d, 0x01}
)

// DHCPEvent is one DHCP message the server saw or sent.
type DHCPEvent struct {
	Type  DHCPType
	XID   uint32
	At    time.Duration // since ServeDHCP
	Frame []byte        // the whole frame
}

// DHCPServer is a minimal DHCP server on one interface for tests: it
// reads the interface's frames through an AF_PACKET socket, answers a
// DHCPDISCOVER from Client with a DHCPOFFER of DHCPOfferIP and a
// DHCPREQUEST with a DHCPACK, and logs each message both ways. A frame
// that reaches it crossed from the NIC's driver to the interface; an
// answer the client then requests crossed back. Safe for concurrent use.
// It owns its socket; Close stops it.
type DHCPServer struct {
	Client net.HardwareAddr
	start  time.Time
	fd     int
	done   chan struct{}
	stop   chan struct{}
	once   sync.Once

	mu     sync.Mutex // guards log, err
	log    []DHCPEvent
	err    error
	notify chan struct{} // closed and replaced on every new event
}

// ServeDHCP starts a server on ifname (which must exist and be up) for
// the client MAC.
func ServeDHCP(ifname string, client net.HardwareAddr) (*DHCPServer, error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("dhcp server: %w", err)
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("dhcp server: packet socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: linux.Htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("dhcp server: bind to %s: %w", ifname, err)
	}
	unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1)
	tv := unix.NsecToTimeval(int64(100 * time.Millisecond))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("dhcp server: receive timeout: %w", err)
	}
	s := &DHCPServer{Client: client, start: time.Now(), fd: fd, done: make(chan struct{}), stop: make(chan struct{}),
		notify: make(chan struct{})}
	go s.serve()
	return s, nil
}

func (s *DHCPServer) serve() {
	defer close(s.done)
	buf := make([]byte, 65536)
	for {
		select {
		case <-s.stop:
			return
		default:
		}
		n, err := unix.Read(s.fd, buf)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			s.fail(fmt.Errorf("dhcp server: read: %w", err))
			return
		}
		frame := buf[:n]
		m, err := ParseDHCP(frame)
		if err != nil || !bytes.Equal(m.Client, s.Client) {
			continue
		}
		s.add(DHCPEvent{Type: m.Type, XID: m.XID, Frame: append([]byte(nil), frame...)})
		var reply DHCPType
		switch m.Type {
		case DHCPDiscover:
			reply = DHCPOffer
		case DHCPRequest:
			reply = DHCPAck
		default:
			continue
		}
		out := DHCPReply(m, reply, DHCPServerMAC, DHCPServerIP, DHCPOfferIP)
		if _, err := unix.Write(s.fd, out); err != nil {
			s.fail(fmt.Errorf("dhcp server: send %v: %w", reply, err))
			return
		}
		s.add(DHCPEvent{Type: reply, XID: m.XID, Frame: out})
	}
}

func (s *DHCPServer) add(e DHCPEvent) {
	e.At = time.Since(s.start)
	s.mu.Lock()
	s.log = append(s.log, e)
	close(s.notify)
	s.notify = make(chan struct{})
	s.mu.Unlock()
}

func (s *DHCPServer) fail(err error) {
	s.mu.Lock()
	s.err = err
	close(s.notify)
	s.notify = make(chan struct{})
	s.mu.Unlock()
}

// Log is every message so far, in order.
func (s *DHCPServer) Log() []DHCPEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]DHCPEvent(nil), s.log...)
}

// Wait returns the first message of type typ, waiting for it until ctx
// ends or the server fails.
func (s *DHCPServer) Wait(ctx context.Context, typ DHCPType) (DHCPEvent, error) {
	for {
		s.mu.Lock()
		for _, e := range s.log {
			if e.Type == typ {
				s.mu.Unlock()
				return e, nil
			}
		}
		err, ch := s.err, s.notify
		s.mu.Unlock()
		if err != nil {
			return DHCPEvent{}, err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return DHCPEvent{}, fmt.Errorf("no %v from %s: %w", typ, s.Client, ctx.Err())
		}
	}
}

// Close stops the server and closes its socket. Idempotent.
func (s *DHCPServer) Close() error {
	s.once.Do(func() {
		close(s.stop)
		<-s.done
		unix.Close(s.fd)
	})
	return nil
}
