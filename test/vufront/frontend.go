package vufront

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/netctl/netctl/vhostnet/guest"
	"github.com/netctl/netctl/vhostuser"
	"github.com/netctl/netctl/virtio"
)

// Config shapes a Frontend's guest: its memory and rings.
type Config struct {
	// MemSize is the guest memory in bytes (default 64 MiB).
	MemSize int
	// RX and TX shape every pair's rings (defaults: 256 entries of 2048
	// bytes; RX buffers of 4096 bytes with MRG_RXBUF). A 64 KiB TSO frame
	// needs TX chains of at least 64 KiB (BufSize*MaxChain) and, without
	// MRG_RXBUF, RX chains as long (RXChain).
	RX, TX guest.QueueConfig
	// RXChain is the size of each RX buffer chain made available (default
	// one RX slot).
	RXChain int
	// Timeout bounds each message exchange with the backend (default 5 s).
	Timeout time.Duration
}

// Pair is one queue pair: vhost-user queue 2i is its RX ring, 2i+1 its TX
// ring (virtio-net's order).
type Pair struct {
	RX, TX *guest.Queue
}

// Frontend is one vhost-user frontend: a connection to the backend, guest
// memory and the rings of its queue pairs. See the package doc for what it
// owns. Not safe for concurrent use.
type Frontend struct {
	socket string
	cfg    Config
	conn   *net.UnixConn

	mem   *guest.Memory
	pairs []*Pair

	// Negotiated state.
	offered, acked virtio.Features
	protoOffered   vhostuser.ProtocolFeatures
	proto          vhostuser.ProtocolFeatures
	maxQueues      uint64
	hdrLen         int
	mergeable      bool
	rxChain        int
	enabled        []bool // per vhost-user queue, after SetupQueues

	log *dirtyLog // EnableLog's, or nil
}

// FeatureProtocol is VHOST_USER_F_PROTOCOL_FEATURES (bit 30) of
// GET_FEATURES: the backend speaks the protocol feature messages.
const FeatureProtocol = virtio.Features(vhostuser.FeatureProtocolFeatures)

// Dial connects to the backend's socket, retrying until ctx ends while
// the socket is missing or refuses (a backend still starting or
// restarting), and creates the guest memory. The Frontend owns both.
func Dial(ctx context.Context, socket string, cfg Config) (*Frontend, error) {
	if cfg.MemSize == 0 {
		cfg.MemSize = 64 << 20
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	f := &Frontend{socket: socket, cfg: cfg}
	if err := f.dial(ctx); err != nil {
		return nil, err
	}
	var err error
	if f.mem, err = guest.NewMemory(cfg.MemSize); err != nil {
		f.conn.Close()
		return nil, fmt.Errorf("vufront: %w", err)
	}
	return f, nil
}

func (f *Frontend) dial(ctx context.Context) error {
	var d net.Dialer
	for {
		c, err := d.DialContext(ctx, "unix", f.socket)
		if err == nil {
			f.conn = c.(*net.UnixConn)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("vufront: connect to %s: %w (last error: %v)", f.socket, ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Memory is the guest memory (GPA 0 at its start).
func (f *Frontend) Memory() *guest.Memory { return f.mem }

// Pairs are the queue pairs SetupQueues made.
func (f *Frontend) Pairs() []*Pair { return f.pairs }

// Acked is the feature word SET_FEATURES sent (without LOG_ALL unless
// logging is on); Offered is what GET_FEATURES returned.
func (f *Frontend) Acked() virtio.Features   { return f.acked }
func (f *Frontend) Offered() virtio.Features { return f.offered }

// Protocol is the protocol feature word SET_PROTOCOL_FEATURES sent.
func (f *Frontend) Protocol() vhostuser.ProtocolFeatures { return f.proto }

// MaxQueues is GET_QUEUE_NUM's answer as the backend gives it (netctl's
// bridge counts virtqueues, two per pair; QEMU reads it as a bound on
// pairs), 1 without MQ.
func (f *Frontend) MaxQueues() int { return int(f.maxQueues) }

func (f *Frontend) pairOf(i int) (*Pair, error) {
	if i < 0 || i >= len(f.pairs) {
		return nil, fmt.Errorf("vufront: queue pair %d: have %d", i, len(f.pairs))
	}
	return f.pairs[i], nil
}

// Disconnect closes the connection only, as a VMM that crashed would; the
// memory and rings stay for Reconnect.
func (f *Frontend) Disconnect() error {
	if f.conn == nil {
		return nil
	}
	err := f.conn.Close()
	f.conn = nil
	return err
}

// Close closes the connection and frees the rings, the memory and the
// log. Idempotent.
func (f *Frontend) Close() error {
	err := f.Disconnect()
	for _, p := range f.pairs {
		p.RX.Close()
		p.TX.Close()
	}
	f.pairs = nil
	if f.log != nil {
		f.log.close()
		f.log = nil
	}
	if f.mem != nil {
		err = errors.Join(err, f.mem.Close())
		f.mem = nil
	}
	return err
}
