package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/vhostuser"
)

// netctl vhost-user serves a vhost-user socket and bridges the front-end
// onto kernel vhost-net (package vhostuser). The process that talks to
// the front-end keeps no privilege when --owner is given: after opening
// /dev/vhost-net (one per queue pair, kept for every front-end) and the
// tap, it drops to the owner (vhostuser.DropPrivileges). What only root
// can undo at exit (removing a socket in a root-owned directory, deleting
// a macvtap it created) is then left to a reaper: a copy of netctl that
// stays root, reads nothing but its stdin, and cleans up when that pipe
// closes, that is when the bridge exits for whatever reason.
func vhostUserCommand() *cli.Command {
	return &cli.Command{
		Name:  "vhost-user",
		Usage: "serve a vhost-user socket and move the VM's packets through kernel vhost-net",
		Description: "A VMM that speaks only vhost-user (Cloud Hypervisor, QEMU without /dev/vhost-net) connects to\n" +
			"--socket; netctl maps its guest memory, programs one /dev/vhost-net per queue pair with it and\n" +
			"attaches a tap or macvtap, so packets move between the guest and the tap inside the kernel.\n" +
			"One front-end at a time; it may disconnect and reconnect (QEMU: reconnect=1). SIGTERM or SIGINT\n" +
			"stops it: the socket is removed, and a tap or macvtap netctl created is deleted.\n" +
			"QEMU: -object memory-backend-memfd,id=mem,size=...,share=on -numa node,memdev=mem\n" +
			"      -chardev socket,id=vu,path=PATH,reconnect=1 -netdev vhost-user,id=n0,chardev=vu[,queues=N]\n" +
			"      -device virtio-net-pci,netdev=n0[,mq=on]",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "socket", Required: true, Usage: "the vhost-user socket to listen on (mode 0600)"},
			&cli.StringFlag{Name: "tap", Usage: "the tap NAME to use (created if missing, deleted at exit if created)"},
			&cli.StringFlag{Name: "macvtap", Usage: "create a macvtap on LOWER[:MODE] (mode bridge by default; deleted at exit)"},
			&cli.IntFlag{Name: "queues", Value: 1, Usage: "queue pairs (1 to 128), one /dev/vhost-net each"},
			&cli.StringFlag{Name: "owner", Usage: "USER[:GROUP] (names or ids) that owns the socket; netctl drops to it once the devices are open"},
			&cli.StringFlag{Name: "profile", Value: vhostuser.ProfileThroughput, Usage: "throughput, latency (vhost busy-polls) or compat (checksum and TSO only)"},
			&cli.DurationFlag{Name: "handshake-timeout", Value: vhostuser.DefaultHandshakeTimeout,
				Usage: "drop a front-end that has not finished its handshake (GET_FEATURES, SET_PROTOCOL_FEATURES) this long after it connected, so it cannot hold the socket; 0: no deadline"},
			&cli.StringFlag{Name: "json-status", Usage: "keep FILE up to date (rewritten atomically when the status changes) with the front-end, features and rings"},
		},
		Action: runVhostUser,
	}
}

// vhostUserReapCommand is the reaper (see vhostUserCommand); not for
// people.
func vhostUserReapCommand() *cli.Command {
	return &cli.Command{
		Name:   "vhost-user-reap",
		Hidden: true,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "socket", Usage: "the bridge's socket"},
			&cli.StringFlag{Name: "socket-ino", Usage: "its inode: removed only if it is still that one"},
			&cli.StringFlag{Name: "link", Usage: "a link the bridge created"},
			&cli.StringFlag{Name: "ifindex", Usage: "its ifindex: deleted only if it is still that one"},
		},
		Action: func(c *cli.Context) error {
			var ino uint64
			var ifindex int
			if s := c.String("socket-ino"); s != "" {
				v, err := strconv.ParseUint(s, 10, 64)
				if err != nil {
					return usageErr("netctl vhost-user-reap", "--socket-ino %.32q: want an inode number", s)
				}
				ino = v
			}
			if s := c.String("ifindex"); s != "" {
				v, err := strconv.ParseInt(s, 10, 32)
				if err != nil || v < 0 { // 0: the bridge created no link
					return usageErr("netctl vhost-user-reap", "--ifindex %.32q: use 0 (no link) to %d", s, math.MaxInt32)
				}
				ifindex = int(v)
			}
			signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP) // the bridge decides when to stop
			io.Copy(io.Discard, os.Stdin)                                  // until the bridge exits
			return reap(c.String("socket"), ino, c.String("link"), ifindex)
		},
	}
}

// reap removes the socket if it is still the bridge's (same inode) and
// deletes the link if it is still the one the bridge created.
func reap(socket string, ino uint64, link string, ifindex int) error {
	var errsOut []error
	var st unix.Stat_t
	if socket != "" && unix.Lstat(socket, &st) == nil && st.Ino == ino {
		if err := os.Remove(socket); err != nil {
			errsOut = append(errsOut, err)
		}
	}
	if link != "" && ifindex > 0 {
		if err := macvtap.DeleteLinkIfSame(link, ifindex); err != nil {
			errsOut = append(errsOut, err)
		}
	}
	return errors.Join(errsOut...)
}

// vhostUserOptions are the parsed flags.
type vhostUserOptions struct {
	socket, tap, lower, status, profile string
	mode                                macvtap.Mode
	queues                              int
	owner                               *vhostuser.Owner
	handshake                           time.Duration // Config.HandshakeTimeout: negative for none
}

func parseVhostUser(c *cli.Context) (vhostUserOptions, error) {
	o := vhostUserOptions{socket: c.String("socket"), tap: c.String("tap"), status: c.String("json-status"),
		profile: c.String("profile"), queues: c.Int("queues"), mode: macvtap.ModeBridge}
	inv := func(format string, args ...any) (vhostUserOptions, error) {
		return o, fmt.Errorf("vhost-user: "+format+": %w", append(args, errs.ErrInvalid)...)
	}
	switch {
	case (o.tap == "") == (c.String("macvtap") == ""):
		return inv("give exactly one of --tap NAME and --macvtap LOWER[:MODE]")
	case o.queues < 1 || o.queues > 128:
		return inv("--queues %d: use 1 to 128", o.queues)
	case o.socket == "" || !filepath.IsAbs(o.socket):
		return inv("--socket %q: give an absolute path", o.socket)
	case c.Duration("handshake-timeout") < 0:
		return inv("--handshake-timeout %v: use 0 (no deadline) or more", c.Duration("handshake-timeout"))
	}
	o.handshake = c.Duration("handshake-timeout")
	if o.handshake == 0 {
		o.handshake = -1
	}
	switch o.profile {
	case vhostuser.ProfileThroughput, vhostuser.ProfileLatency, vhostuser.ProfileCompat:
	default:
		return inv("--profile %.32q: use throughput, latency or compat", o.profile)
	}
	if m := c.String("macvtap"); m != "" {
		lower, mode, hasMode := strings.Cut(m, ":")
		if lower == "" {
			return inv("--macvtap %q: give LOWER[:MODE]", m)
		}
		o.lower = lower
		if hasMode {
			md, err := macvtap.ParseMode(mode)
			if err != nil {
				return o, fmt.Errorf("vhost-user: --macvtap: %w", err)
			}
			o.mode = md
		}
	}
	if s := c.String("owner"); s != "" {
		own, err := lookupOwner(s)
		if err != nil {
			return o, err
		}
		o.owner = own
	}
	return o, nil
}

// lookupOwner reads USER[:GROUP] from the user database (the group
// defaults to the user's primary group); numeric ids need no database
// entry ("65534:65534", or "65534" for the same gid).
func lookupOwner(s string) (*vhostuser.Owner, error) {
	name, group, hasGroup := strings.Cut(s, ":")
	bad := func(format string, args ...any) (*vhostuser.Owner, error) {
		return nil, fmt.Errorf("vhost-user: --owner %q: "+format+": %w", append(append([]any{s}, args...), errs.ErrInvalid)...)
	}
	var uid, gid int
	if n, err := strconv.Atoi(name); err == nil {
		uid, gid = n, n
		if u, err := user.LookupId(name); err == nil {
			gid, _ = strconv.Atoi(u.Gid)
		}
	} else {
		u, err := user.Lookup(name)
		if err != nil {
			return bad("%v: give a user name or uid that exists", err)
		}
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
	}
	if hasGroup {
		if n, err := strconv.Atoi(group); err == nil {
			gid = n
		} else if g, err := user.LookupGroup(group); err == nil {
			gid, _ = strconv.Atoi(g.Gid)
		} else {
			return bad("%v: give a group name or gid that exists", err)
		}
	}
	if uid <= 0 || gid <= 0 {
		return bad("uid %d gid %d: give a user and group other than root", uid, gid)
	}
	return &vhostuser.Owner{UID: uid, GID: gid}, nil
}

func runVhostUser(c *cli.Context) error {
	o, err := parseVhostUser(c)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(c.App.ErrWriter, nil))

	// The backend, closed (and deleted if made here) on every way out.
	backend, created, err := openVhostUserBackend(o)
	if err != nil {
		return err
	}
	dropped := false
	defer func() {
		if m, ok := backend.(*macvtap.Macvtap); ok && dropped {
			m.CloseQueues() // the link is the reaper's to delete
			return
		}
		backend.Close()
	}()
	if created {
		log.Info("vhost-user: created", "kind", backend.Kind(), "name", backend.Name())
	}
	offloads, err := macvtap.ProbeOffloads(backend.Kind())
	if err != nil {
		log.Warn("vhost-user: cannot probe the tap's offloads; offering none", "err", err)
		offloads = 0
	}
	cfg := vhostuser.Config{Socket: o.socket, Owner: o.owner, Backend: backend, Queues: o.queues, Offloads: offloads,
		Profile: o.profile, Logger: log, HandshakeTimeout: o.handshake}
	var (
		statusMu  sync.Mutex // guards statusErr and warnings; OnStatus runs on the session's goroutine
		statusErr error
		warnings  []string // for the status file: the reaper died
	)
	// saveStatus writes st and the warnings; statusMu is held.
	saveStatus := func(st vhostuser.Status) {
		if err := writeStatus(o.status, statusFile{st, warnings}); err != nil && statusErr == nil {
			statusErr = fmt.Errorf("vhost-user: status file %s: %w", o.status, err)
			log.Error("vhost-user: cannot write the status file", "file", o.status, "err", err)
		}
	}
	if o.status != "" {
		cfg.OnStatus = func(st vhostuser.Status) {
			statusMu.Lock()
			defer statusMu.Unlock()
			saveStatus(st)
		}
	}
	b, err := vhostuser.NewBridge(cfg)
	if err != nil {
		return err
	}
	defer b.Close()
	if o.owner != nil {
		var ino uint64
		var st unix.Stat_t
		if unix.Lstat(o.socket, &st) == nil {
			ino = st.Ino
		}
		var link string
		var ifindex int
		if m, ok := backend.(*macvtap.Macvtap); ok && created {
			link, ifindex = m.Name(), m.Ifindex()
		}
		// If the reaper dies first (killed), nothing will clean up: say so
		// at once, on stderr and in the status file, and serve on.
		died := func(pid int, how error) {
			w := reaperDied(pid, how, o.socket, link)
			fmt.Fprintf(c.App.ErrWriter, "netctl %s\n", w)
			if o.status == "" {
				return
			}
			statusMu.Lock()
			defer statusMu.Unlock()
			warnings = append(warnings, w)
			saveStatus(b.Status())
		}
		done, err := startReaper(o.socket, ino, link, ifindex, died)
		if err != nil {
			return err
		}
		defer done.Close() // EOF: the reaper cleans up once this process is gone
		note, err := vhostuser.DropPrivileges(o.owner.UID, o.owner.GID)
		if err != nil {
			return err
		}
		dropped = true
		log.Info("vhost-user: privileges dropped", "how", note)
	}
	if o.status != "" {
		// Fail now, not at the first front-end, if the file cannot be kept.
		statusMu.Lock()
		err := writeStatus(o.status, statusFile{b.Status(), warnings})
		statusMu.Unlock()
		if err != nil {
			// The message says what to do; the generic "run as root" hint would not.
			return &oneLineError{fmt.Errorf("vhost-user: status file %s: %w", o.status, err)}
		}
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	st := b.Status()
	fmt.Fprintf(c.App.Writer, "netctl vhost-user: serving %s: %s, %d queue pair(s), offering %s\n",
		o.socket, st.Backend, o.queues, strings.Join(st.OfferedNames, "|"))
	if err := b.Serve(ctx); err != nil {
		return err
	}
	if err := b.Close(); err != nil && !(dropped && errors.Is(err, os.ErrPermission)) {
		return err
	}
	if o.status != "" {
		os.Remove(o.status)
	}
	statusMu.Lock()
	defer statusMu.Unlock()
	return statusErr
}

// openVhostUserBackend opens (or creates) the tap, or creates the macvtap,
// with a virtio-net header and one queue per queue pair, and brings it up.
func openVhostUserBackend(o vhostUserOptions) (macvtap.Backend, bool, error) {
	if o.lower != "" {
		m, err := macvtap.CreateMacvtap(macvtap.MacvtapConfig{Name: "nvu%d", Lower: o.lower, Mode: o.mode, Queues: o.queues,
			VnetHdrSize: 12})
		if err != nil {
			return nil, false, err
		}
		if err := macvtap.LinkUp(m.Name()); err != nil {
			m.Close()
			return nil, false, err
		}
		return m, true, nil
	}
	_, err := net.InterfaceByName(o.tap)
	created := err != nil
	// The send buffer QEMU gives its own taps (net/tap-linux.c: INT_MAX
	// unless sndbuf= says otherwise), so a guest behind the bridge is not
	// throttled where the same guest on QEMU's tap,vhost=on is not.
	t, err := macvtap.CreateTap(macvtap.TapConfig{Name: o.tap, VnetHdr: true, VnetHdrSize: 12, Queues: o.queues, SndBuf: math.MaxInt32})
	if err != nil {
		return nil, false, err
	}
	if created { // a tap that is not persistent goes away with its last fd
		if err := t.Up(); err != nil {
			t.Close()
			return nil, false, err
		}
	}
	return t, created, nil
}

// startReaper starts the root copy of netctl that cleans up after this
// process; closing the returned pipe (or exiting) tells it to. If the
// reaper exits before that (killed: it ignores SIGINT, SIGTERM and
// SIGHUP), died is called once, from a goroutine of its own, with the
// reaper's pid and how it ended.
func startReaper(socket string, ino uint64, link string, ifindex int, died func(pid int, how error)) (io.Closer, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("vhost-user: reaper: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("vhost-user: reaper: %w", err)
	}
	cmd := exec.Command(exe, "vhost-user-reap", "--socket", socket, "--socket-ino", strconv.FormatUint(ino, 10),
		"--link", link, "--ifindex", strconv.Itoa(ifindex))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = r, os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("vhost-user: reaper: %w", err)
	}
	r.Close()
	rp := &reaperPipe{w: w}
	go func() {
		err := cmd.Wait() // wait4 on our own child: works after the privilege drop too
		if err == nil {
			err = errors.New("it exited")
		}
		rp.mu.Lock()
		closed := rp.closed
		rp.mu.Unlock()
		if !closed && died != nil {
			died(cmd.Process.Pid, err)
		}
	}()
	return rp, nil
}

// reaperPipe is the write end of the reaper's stdin; this process owns it.
type reaperPipe struct {
	w      *os.File
	mu     sync.Mutex // guards closed
	closed bool       // Close was called: the reaper's exit from then on is the expected one
}

// Close tells the reaper to clean up now.
func (p *reaperPipe) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	return p.w.Close()
}

// reaperDied is the warning for a reaper that died before the bridge: what
// will be left and how to remove it.
func reaperDied(pid int, how error, socket, link string) string {
	left, it, fix := "the socket "+socket, "it", "'rm -f "+socket+"'"
	if link != "" {
		left, it = left+" and macvtap "+link, "them"
		fix += " and 'ip link delete " + link + "'"
	}
	return fmt.Sprintf("vhost-user: warning: the cleanup helper (pid %d) died (%v): on exit %s will be left; remove %s as root with %s",
		pid, how, left, it, fix)
}

// statusFile is what --json-status holds: the bridge's status and
// netctl's warnings.
type statusFile struct {
	vhostuser.Status
	Warnings []string `json:"warnings,omitempty"`
}

// writeStatus replaces file with st as JSON: a temporary file in the same
// directory, renamed over it.
func writeStatus(file string, st statusFile) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	b = escapeOutput(b) // C1 and bidi controls as \u escapes, like netctl's --json (termsafe.go)
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".*")
	if err != nil {
		return fmt.Errorf("%w: with --owner, the status file's directory must be writable by the owner", err)
	}
	_, werr := tmp.Write(append(b, '\n'))
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr, os.Chmod(tmp.Name(), 0o644)); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), file); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}
