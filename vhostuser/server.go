package vhostuser

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/vhostnet"
	"github.com/netctl/netctl/virtio"
)

// Owner is the user and group the socket belongs to (the VMM's).
type Owner struct {
	UID, GID int
}

// Config says what a Bridge serves.
type Config struct {
	// Socket is the path of the listening socket (mode 0600). A stale
	// socket there (nobody listening) is replaced; a live one or any other
	// file is refused.
	Socket string
	// Owner, when set, owns the socket; nil leaves it this process's.
	Owner *Owner
	// Backend is the tap or macvtap whose queue q becomes vhost-net's
	// backend of queue pair q. It needs a virtio-net header (IFF_VNET_HDR)
	// and at least Queues queues. The Bridge does not own it.
	Backend macvtap.Backend
	// Queues is the number of queue pairs (0 means 1), one /dev/vhost-net
	// each, at most Backend.Queues() and 128 (vhost-user's 8-bit ring
	// index).
	Queues int
	// Offloads are the offloads the tap takes (macvtap.ProbeOffloads):
	// only their virtio-net bits are offered to the front-end.
	Offloads macvtap.Offloads
	// Profile is throughput (default), latency or compat.
	Profile string
	// MaxMemSlots caps GET_MAX_MEM_SLOTS; 0 means the vhost module's
	// max_mem_regions (which is also the upper bound).
	MaxMemSlots int
	// Logger gets a line per connection, refusal and refused request;
	// nil discards them.
	Logger *slog.Logger
	// OnStatus, when set, is called with the new Status whenever it
	// changes (a message that changed something, a refusal with a new
	// error, a connect or disconnect), from the goroutine that serves the
	// connection; a front-end repeating itself causes no calls. The count
	// of refused connections reaches it with the next change.
	OnStatus func(Status)
	// OpenVhost opens one vhost-net device; nil opens /dev/vhost-net.
	OpenVhost func() (Vhost, error)
	// HandshakeTimeout is how long after connecting a front-end may take
	// to finish its handshake (see DefaultHandshakeTimeout); 0
	// means DefaultHandshakeTimeout, a negative value no deadline.
	HandshakeTimeout time.Duration
}

// maxQueuePairs: vhost-user's ring index is 8 bits (SET_VRING_KICK).
const maxQueuePairs = 128

// DefaultHandshakeTimeout is how long after connecting a front-end may
// take to finish its handshake (counted from the connection, not from
// its last message: one that keeps sending other requests holds the
// bridge as surely as a silent one): GET_FEATURES and, when it
// asked for them, SET_PROTOCOL_FEATURES, which QEMU, Cloud Hypervisor
// and rust-vmm's front-ends send the moment they connect (milliseconds).
// One that has not is dropped, with the reason in the log, so that it
// cannot hold the bridge, which serves one front-end at a time, against
// the VMM that should connect. After the handshake there is no deadline:
// a front-end stays silent, with nothing set up, for as long as its
// guest has not started the NIC (firmware, a bootloader, a paused VM),
// and dropping it would take a QEMU without reconnect= off the network
// for good.
const DefaultHandshakeTimeout = 30 * time.Second

// maxSlotsCap is QEMU's VHOST_USER_MAX_RAM_SLOTS.
const maxSlotsCap = 512

// Bridge serves one vhost-user socket onto kernel vhost-net. It opens
// one /dev/vhost-net per queue pair once, in NewBridge, and keeps them
// across front-ends (each session ends with VHOST_RESET_OWNER), so the
// process needs no privilege after NewBridge (see DropPrivileges). One
// front-end is served at a time: a second connection while one is
// served is refused (closed at once, with a log line); it may connect
// again once the first has gone. Its methods are safe for concurrent use.
type Bridge struct {
	cfg          Config
	log          *slog.Logger
	queues       int
	devs         []Vhost // owned; opened by NewBridge
	ln           *net.UnixListener
	offered      virtio.Features
	vhostOffered virtio.Features
	protoOffered ProtocolFeatures
	maxSlots     int
	busyPollUS   uint32
	handshake    time.Duration // HandshakeTimeout; 0: none

	mu       sync.Mutex // guards status, told, closed, serving
	status   Status
	told     Status // the status OnStatus was last called with
	closed   bool
	serving  bool
	sockIno  uint64 // the socket's inode, to remove only our own
	sockPath string
	// trace, set only by tests before Serve, sees every message read.
	trace func(*Message)
	// The warnings a front-end can repeat at will, rate-limited.
	refusedReqs, refusedConns logLimit
	// errPublish limits publications of a status whose only change is
	// its counters or last error (which a front-end changes at will).
	errPublish logLimit
}

// NewBridge checks cfg, opens the vhost-net devices and listens on the
// socket. On failure nothing is left open or created. The Bridge owns the
// devices and the socket (Close removes it); it does not own the backend.
func NewBridge(cfg Config) (*Bridge, error) {
	if cfg.Queues == 0 {
		cfg.Queues = 1
	}
	switch {
	case cfg.Socket == "":
		return nil, fmt.Errorf("vhost-user: no socket path: %w: give one (--socket PATH)", ErrInvalid)
	case cfg.Backend == nil:
		return nil, fmt.Errorf("vhost-user: no backend: %w: give a tap or macvtap", ErrInvalid)
	case cfg.Queues < 1 || cfg.Queues > maxQueuePairs:
		return nil, fmt.Errorf("vhost-user: %d queue pairs: %w: use 1 to %d", cfg.Queues, ErrInvalid, maxQueuePairs)
	case cfg.Queues > cfg.Backend.Queues():
		return nil, fmt.Errorf("vhost-user: %d queue pairs, but %s %s has %d queue(s): %w: open the backend with as many queues",
			cfg.Queues, cfg.Backend.Kind(), cfg.Backend.Name(), cfg.Backend.Queues(), ErrInvalid)
	case cfg.MaxMemSlots < 0:
		return nil, fmt.Errorf("vhost-user: max memory slots %d: %w", cfg.MaxMemSlots, ErrInvalid)
	}
	switch cfg.Profile {
	case "":
		cfg.Profile = ProfileThroughput
	case ProfileThroughput, ProfileLatency, ProfileCompat:
	default:
		return nil, fmt.Errorf("vhost-user: profile %.32q: %w: use throughput, latency or compat", cfg.Profile, ErrInvalid)
	}
	if hdr, err := cfg.Backend.VnetHdrSize(); err != nil || hdr == 0 {
		return nil, fmt.Errorf("vhost-user: backend %s has no virtio-net header (IFF_VNET_HDR) (%v): %w: create it with one",
			cfg.Backend.Name(), err, ErrInvalid)
	}
	b := &Bridge{cfg: cfg, queues: cfg.Queues, log: cfg.Logger}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	if cfg.Profile == ProfileLatency {
		b.busyPollUS = LatencyBusyPollUS
	}
	switch {
	case cfg.HandshakeTimeout == 0:
		b.handshake = DefaultHandshakeTimeout
	case cfg.HandshakeTimeout > 0:
		b.handshake = cfg.HandshakeTimeout
	}
	open := cfg.OpenVhost
	if open == nil {
		open = openVhostNet
	}
	ok := false
	defer func() {
		if !ok {
			b.closeDevs()
		}
	}()
	for i := 0; i < cfg.Queues; i++ {
		d, err := open()
		if err != nil {
			return nil, fmt.Errorf("vhost-user: queue pair %d: %w", i, err)
		}
		b.devs = append(b.devs, d)
	}
	f, err := b.devs[0].Features()
	if err != nil {
		return nil, fmt.Errorf("vhost-user: %w", err)
	}
	b.vhostOffered = f
	b.offered = offerFeatures(f, cfg.Offloads, cfg.Queues, cfg.Profile)
	b.protoOffered = ProtocolMQ | ProtocolReplyAck | ProtocolLogShmFD | ProtocolConfigureMemSlots | ProtocolRARP
	b.maxSlots = maxSlotsCap
	if n, err := vhostnet.MaxMemRegions(); err == nil && n > 0 {
		b.maxSlots = min(n, maxSlotsCap)
	}
	if cfg.MaxMemSlots > 0 {
		b.maxSlots = min(b.maxSlots, cfg.MaxMemSlots)
	}
	ln, ino, err := listen(cfg.Socket, cfg.Owner)
	if err != nil {
		return nil, err
	}
	b.ln, b.sockIno, b.sockPath = ln, ino, cfg.Socket
	b.status = b.baseStatus()
	ok = true
	return b, nil
}

func (b *Bridge) closeDevs() error {
	var first error
	for _, d := range b.devs {
		if err := d.Close(); err != nil && first == nil {
			first = err
		}
	}
	b.devs = nil
	return first
}

// listen makes the socket in a fresh 0700 directory next to path, sets its
// mode 0600 and owner, then renames it into place, so that it is never
// reachable with another mode or owner.
func listen(path string, owner *Owner) (*net.UnixListener, uint64, error) {
	if len(path) > 107 {
		return nil, 0, fmt.Errorf("vhost-user: socket path of %d bytes: %w: use at most 107 (sun_path)", len(path), ErrInvalid)
	}
	if err := clearStale(path); err != nil {
		return nil, 0, err
	}
	dir, err := os.MkdirTemp(filepath.Dir(path), ".netctl-vu-")
	if err != nil {
		return nil, 0, fmt.Errorf("vhost-user: socket directory: %w", err)
	}
	defer os.Remove(dir)
	tmp := filepath.Join(dir, "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, 0, fmt.Errorf("vhost-user: listen: %w", err)
	}
	ln.SetUnlinkOnClose(false)
	fail := func(err error) (*net.UnixListener, uint64, error) {
		ln.Close()
		os.Remove(tmp)
		return nil, 0, err
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return fail(fmt.Errorf("vhost-user: socket mode: %w", err))
	}
	if owner != nil {
		if err := os.Lchown(tmp, owner.UID, owner.GID); err != nil {
			return fail(fmt.Errorf("vhost-user: socket owner %d:%d: %w", owner.UID, owner.GID, err))
		}
	}
	var st unix.Stat_t
	if err := unix.Lstat(tmp, &st); err != nil {
		return fail(fmt.Errorf("vhost-user: %w", err))
	}
	if err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, path, unix.RENAME_NOREPLACE); err != nil {
		return fail(fmt.Errorf("vhost-user: put the socket at %s: %w", path, err))
	}
	return ln, st.Ino, nil
}

// clearStale removes a socket at path that nobody listens on (a bridge
// that died); a live socket is ErrBusy, any other file ErrConflict.
func clearStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("vhost-user: %w", err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("vhost-user: %s exists and is not a socket: %w: remove it or choose another path", path, ErrConflict)
	}
	c, err := net.Dial("unix", path)
	if err == nil {
		c.Close()
		return fmt.Errorf("vhost-user: %s: another process is listening there: %w: stop it or choose another path", path, ErrBusy)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("vhost-user: %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("vhost-user: remove the stale socket %s: %w", path, err)
	}
	return nil
}

// Serve accepts front-ends until ctx is done, one at a time, and returns
// nil then; it returns an error only when the bridge cannot go on (the
// listener failed, or vhost-net refused to reset after a front-end left).
// Serve may be called once.
func (b *Bridge) Serve(ctx context.Context) error {
	b.mu.Lock()
	if b.closed || b.serving {
		b.mu.Unlock()
		return fmt.Errorf("vhost-user: Serve: %w: the bridge is closed or already serving", ErrClosed)
	}
	b.serving = true
	b.mu.Unlock()
	b.publishStatus(b.baseStatus())

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { <-ctx.Done(); b.ln.Close() }()

	type ended struct{ err error }
	var (
		active  *net.UnixConn
		done    chan ended
		fatal   error
		pending *net.UnixConn // the next front-end, taken while the last one's session is torn down
	)
	conns := make(chan *net.UnixConn)
	acceptDone := make(chan struct{}) // closed when the accept loop ends
	var acceptErr error               // set before acceptDone is closed
	go func() {
		defer close(acceptDone)
		for {
			c, err := b.ln.AcceptUnix()
			if err != nil {
				acceptErr = err
				return
			}
			select {
			case conns <- c:
			case <-ctx.Done():
				c.Close()
			}
		}
	}()
	// start serves front-end c: takes the devices and runs its session.
	start := func(c *net.UnixConn, pid, uid int) {
		s := newSession(b, c, pid)
		if err := s.start(); err != nil {
			b.log.Error("vhost-user: cannot take the vhost-net devices for a front-end", "frontend_pid", pid, "err", err)
			c.Close()
			fatal = err
			cancel()
			return
		}
		b.log.Info("vhost-user: front-end connected", "frontend_pid", pid, "frontend_uid", uid)
		active, done = c, make(chan ended, 1)
		b.connected(s)
		go func() {
			err := s.serve()
			c.Close()
			if serr := s.stop(); serr != nil {
				err = errors.Join(err, &resetError{serr})
			}
			done <- ended{err}
		}()
	}
	acceptCase := acceptDone
	for {
		select {
		case c := <-conns:
			pid, uid := peer(c)
			if active != nil && pending == nil && peerGone(active) {
				// The connected front-end has left and its session is
				// being torn down: this is most likely it coming back
				// (QEMU's reconnect=, a restarted VMM). Serve it next
				// instead of refusing it.
				pending = c
				continue
			}
			if active != nil {
				b.refusedConns.warn(b.log, "vhost-user: connection refused: another front-end is connected; it may connect once that one leaves",
					"frontend_pid", pid, "frontend_uid", uid, "connected_pid", b.Status().FrontendPID)
				b.mu.Lock()
				b.status.Refused++
				b.mu.Unlock()
				c.Close()
				continue
			}
			start(c, pid, uid)
		case e := <-done:
			var idle *idleError
			switch {
			case errors.As(e.err, &idle):
				b.log.Warn("vhost-user: front-end dropped: "+idle.Error(), "frontend_pid", idle.pid)
				b.noteError(e.err)
			case e.err != nil:
				b.log.Warn("vhost-user: front-end disconnected", "err", e.err)
				b.noteError(e.err)
			default:
				b.log.Info("vhost-user: front-end disconnected")
			}
			var re *resetError
			if errors.As(e.err, &re) {
				fatal = re.err
				cancel()
			}
			b.refusedReqs.report(b.log, "refused requests")
			b.refusedConns.report(b.log, "refused connections")
			active, done = nil, nil
			b.disconnected()
			if c := pending; c != nil {
				pending = nil
				if fatal != nil {
					c.Close()
					continue
				}
				pid, uid := peer(c)
				start(c, pid, uid)
			}
		case <-ctx.Done():
			if pending != nil {
				pending.Close()
				pending = nil
			}
			if active != nil {
				active.Close()
				e := <-done
				var re *resetError
				if errors.As(e.err, &re) && fatal == nil {
					fatal = re.err
				}
				b.disconnected()
			}
			<-acceptDone
			return fatal
		case <-acceptCase:
			if ctx.Err() == nil && fatal == nil {
				fatal = fmt.Errorf("vhost-user: accept: %w", acceptErr)
			}
			cancel()
			acceptCase = nil // a nil channel is never ready
		}
	}
}

// idleError ends a session whose front-end stayed silent past the
// handshake deadline.
type idleError struct {
	pid   int
	after time.Duration
	step  string // how far the handshake got
	msgs  int    // messages it sent
}

func (e *idleError) Error() string {
	what := fmt.Sprintf("it sent nothing for %v %s", e.after, e.step)
	if e.msgs > 0 {
		what = fmt.Sprintf("it sent %d message(s) but did not finish its handshake within %v of connecting (it stopped %s)", e.msgs, e.after, e.step)
	}
	return what + ", before its handshake was done (a VMM finishes it the moment it " +
		"connects), and could hold the bridge against the front-end that should connect; a slower front-end needs a " +
		"longer --handshake-timeout"
}

// resetError marks a failure to release the devices after a session: the
// bridge cannot serve another front-end with them.
type resetError struct{ err error }

func (e *resetError) Error() string {
	return fmt.Sprintf("releasing the vhost-net devices failed: %v", e.err)
}

// peerGone says the front-end on c has hung up (or c is closed already):
// a poll that does not wait, so no message is consumed.
func peerGone(c *net.UnixConn) bool {
	raw, err := c.SyscallConn()
	if err != nil {
		return true
	}
	gone := false
	if cerr := raw.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
		if n, err := unix.Poll(fds, 0); err == nil {
			gone = n > 0 && fds[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0
		}
	}); cerr != nil {
		return true
	}
	return gone
}

// peer returns the connected process's pid and uid (SO_PEERCRED), or -1.
func peer(c *net.UnixConn) (pid, uid int) {
	pid, uid = -1, -1
	raw, err := c.SyscallConn()
	if err != nil {
		return
	}
	raw.Control(func(fd uintptr) {
		if cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
			pid, uid = int(cred.Pid), int(cred.Uid)
		}
	})
	return
}

// Close stops listening, removes the socket (only if it is still the one
// NewBridge made) and closes the vhost-net devices. Call it after Serve
// returned. Closing twice is not an error.
func (b *Bridge) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	err := b.ln.Close()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	var st unix.Stat_t
	if unix.Lstat(b.sockPath, &st) == nil && st.Ino == b.sockIno {
		if rerr := os.Remove(b.sockPath); rerr != nil && err == nil {
			err = rerr
		}
	}
	if cerr := b.closeDevs(); cerr != nil && err == nil {
		err = cerr
	}
	return err
}

// Serve is NewBridge, Serve and Close: it serves cfg until ctx is done.
func Serve(ctx context.Context, cfg Config) error {
	b, err := NewBridge(cfg)
	if err != nil {
		return err
	}
	err = b.Serve(ctx)
	return errors.Join(err, b.Close())
}
