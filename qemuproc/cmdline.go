package qemuproc

import (
	"bytes"
	"fmt"
	"path"
	"strconv"
	"strings"
)

// Limits on what is read from a process's command line, which is outside
// input: a cmdline longer than MaxCmdline is cut there (QEMU's own
// arguments come first and libvirt's longest lines are tens of KiB), and
// at most MaxArgs arguments, MaxChardevs chardevs and MaxMonitors
// monitors are kept.
const (
	MaxCmdline  = 1 << 20
	MaxArgs     = 1 << 14
	MaxChardevs = 256
	MaxMonitors = 64
)

// Monitor is one QMP monitor on a QEMU command line.
//
// The forms: -qmp unix:PATH,server=on,wait=off (also the old
// "server,nowait" and -qmp-pretty), -qmp chardev:ID, the pair -chardev socket,id=X,path=PATH,
// server=on with -mon chardev=X,mode=control, and libvirt's
// -chardev socket,id=charmonitor,fd=N,server=on,wait=off with
// -mon chardev=charmonitor,id=monitor,mode=control, a socket libvirtd
// created and holds. QEMU 7.2 accepts no JSON form of -chardev or -mon
// (it reads '{"backend":...' as QemuOpts and refuses it), and libvirt
// writes both as QemuOpts even where its -device is JSON.
type Monitor struct {
	Option   string `json:"option"`             // "-qmp", "-qmp-pretty", "-mon", or "--qmp" (from Resolve)
	Chardev  string `json:"chardev,omitempty"`  // the -chardev id of a -mon or -qmp chardev:ID
	Path     string `json:"path,omitempty"`     // the socket path as QEMU was given it
	Abstract bool   `json:"abstract,omitempty"` // a Linux abstract socket (abstract=on)
	FD       string `json:"fd,omitempty"`       // fd=N: a socket QEMU inherited
	Server   bool   `json:"server"`             // QEMU listens (otherwise it connects out)
	// Libvirt is set for libvirt's monitor (id charmonitor): libvirtd holds
	// its one connection for the VM's lifetime.
	Libvirt bool `json:"libvirt,omitempty"`
	// Unusable says why netctl cannot connect to this monitor ("" when it
	// can try).
	Unusable string `json:"unusable,omitempty"`
	// Socket is where netctl connects to it from its own root and cwd
	// (set by List and Find: see resolveSocket in proc.go).
	Socket string `json:"socket,omitempty"`
}

// String names the monitor for people: where netctl reaches it, or how
// the command line gives it ("fd 1729 (-mon chardev charmonitor)").
func (m Monitor) String() string {
	switch {
	case m.Socket != "":
		return m.Socket
	case m.FD != "":
		return "fd " + m.FD + " (" + m.Option + " chardev " + m.Chardev + ")"
	case m.Abstract:
		return "@" + m.Path
	case m.Path != "":
		return m.Path
	case m.Chardev != "":
		return m.Option + " chardev " + m.Chardev
	}
	return m.Option
}

// Cmdline is what netctl reads from a QEMU command line.
type Cmdline struct {
	Binary    string    // argv[0]
	Name      string    // -name NAME or -name guest=NAME,...; "" when none
	UUID      string    // -uuid UUID (libvirt gives every domain's QEMU its UUID), lower case; "" when none
	Monitors  []Monitor // -qmp unix: and tcp: ones in command-line order, then those on a -chardev (-mon, -qmp chardev:ID)
	Chroot    string    // -chroot DIR or -run-with chroot=DIR
	Daemonize bool      // -daemonize: QEMU changed its cwd to / after start
	Truncated bool      // the command line hit MaxCmdline or MaxArgs
}

// IsQEMU says whether argv0 names a QEMU system emulator: a binary whose
// name starts with qemu-system- or is qemu-kvm.
func IsQEMU(argv0 string) bool {
	b := path.Base(argv0)
	return strings.HasPrefix(b, "qemu-system-") || b == "qemu-kvm"
}

// SplitCmdline splits the NUL-separated contents of /proc/PID/cmdline into
// arguments, at most MaxArgs of them from at most MaxCmdline bytes; the
// second result says whether anything was cut.
func SplitCmdline(raw []byte) ([]string, bool) {
	cut := false
	if len(raw) > MaxCmdline {
		raw, cut = raw[:MaxCmdline], true
	}
	raw = bytes.TrimSuffix(raw, []byte{0})
	if len(raw) == 0 {
		return nil, cut
	}
	var args []string
	for len(raw) > 0 || len(args) == 0 {
		if len(args) == MaxArgs {
			return args, true
		}
		a, rest, found := bytes.Cut(raw, []byte{0})
		args = append(args, string(a))
		raw = rest
		if !found {
			break
		}
	}
	return args, cut
}

// ParseCmdline reads a QEMU command line (argv, argv[0] first). It is pure:
// it touches nothing, and paths stay as QEMU was given them. Options QEMU
// accepts with two dashes ("--qmp") count too. An error means argv is not
// a QEMU command line netctl can read (empty, or not a QEMU binary).
func ParseCmdline(argv []string) (Cmdline, error) {
	if len(argv) == 0 {
		return Cmdline{}, fmt.Errorf("qemuproc: empty command line: %w", ErrInvalid)
	}
	if !IsQEMU(argv[0]) {
		return Cmdline{}, fmt.Errorf("qemuproc: %q is not qemu-system-* or qemu-kvm: %w", clip(argv[0]), ErrInvalid)
	}
	if len(argv) > MaxArgs {
		argv = argv[:MaxArgs]
	}
	c := Cmdline{Binary: argv[0]}
	chardevs := map[string][]option{}
	var mons []Monitor
	for i := 1; i < len(argv); i++ {
		name := argv[i]
		if strings.HasPrefix(name, "--") {
			name = name[1:]
		}
		if name == "-daemonize" {
			c.Daemonize = true
			continue
		}
		switch name {
		case "-name", "-uuid", "-qmp", "-qmp-pretty", "-chardev", "-mon", "-chroot", "-run-with":
		default:
			continue
		}
		if i+1 >= len(argv) {
			break
		}
		i++
		arg := argv[i]
		switch name {
		case "-name":
			if v, ok := get(splitOpts(arg, "guest"), "guest"); ok {
				c.Name = v
			}
		case "-uuid":
			if len(arg) <= 64 {
				c.UUID = strings.ToLower(arg)
			}
		case "-chroot":
			c.Chroot = arg
		case "-run-with":
			if v, ok := get(splitOpts(arg, ""), "chroot"); ok {
				c.Chroot = v
			}
		case "-qmp", "-qmp-pretty":
			if id, ok := strings.CutPrefix(arg, "chardev:"); ok {
				// -qmp chardev:ID (softmmu/vl.c monitor_parse): a -mon on a -chardev
				if len(mons) < MaxMonitors {
					mons = append(mons, Monitor{Option: name, Chardev: id})
				}
			} else if len(c.Monitors) < MaxMonitors {
				c.Monitors = append(c.Monitors, parseQMPArg(name, arg))
			}
		case "-chardev":
			opts := splitOpts(arg, "backend")
			if id, ok := get(opts, "id"); ok && (len(chardevs) < MaxChardevs || chardevs[id] != nil) {
				chardevs[id] = opts
			}
		case "-mon":
			opts := splitOpts(arg, "chardev")
			if mode, _ := get(opts, "mode"); mode != "control" {
				continue // readline: the human monitor, not QMP
			}
			id, _ := get(opts, "chardev")
			if len(mons) < MaxMonitors {
				mons = append(mons, Monitor{Option: "-mon", Chardev: id})
			}
		}
	}
	// A -mon may name a -chardev defined after it.
	for _, m := range mons {
		if len(c.Monitors) == MaxMonitors {
			break
		}
		opts, ok := chardevs[m.Chardev]
		if !ok {
			m.Unusable = fmt.Sprintf("no -chardev with id %q", m.Chardev)
		} else {
			socketMonitor(&m, opts)
		}
		c.Monitors = append(c.Monitors, m)
	}
	return c, nil
}

// parseQMPArg reads -qmp's argument, a character device in QEMU's short
// form (chardev/char.c qemu_chr_parse_compat): "unix:PATH[,opts]",
// "tcp:HOST:PORT[,opts]", "stdio", ...
func parseQMPArg(option, arg string) Monitor {
	m := Monitor{Option: option}
	backend, rest, _ := strings.Cut(arg, ":")
	switch backend {
	case "unix":
		opts := splitOpts(rest, "path")
		m.Path, _ = get(opts, "path")
		m.Abstract = boolOpt(opts, "abstract", false)
		m.Server = boolOpt(opts, "server", false)
		if m.Path == "" {
			m.Unusable = "no socket path"
		} else if !m.Server {
			m.Unusable = "QEMU connects out to this socket (no server=on): whoever listens there holds the monitor"
		}
	case "tcp", "telnet", "websocket":
		m.Unusable = backend + " monitor: fds can be passed only over a unix socket"
	default:
		m.Unusable = fmt.Sprintf("%q is not a socket", clip(arg))
	}
	return m
}

// socketMonitor fills m from the options of the -chardev it names.
func socketMonitor(m *Monitor, opts []option) {
	backend, _ := get(opts, "backend")
	if backend != "socket" {
		m.Unusable = fmt.Sprintf("chardev backend %q is not a socket", clip(backend))
		return
	}
	id, _ := get(opts, "id")
	m.Libvirt = id == "charmonitor"
	m.Server = boolOpt(opts, "server", false)
	if fd, ok := get(opts, "fd"); ok {
		m.FD = fd
		m.Unusable = "socket on inherited fd " + clip(fd) + ": only the process that started QEMU can reach it"
		if m.Libvirt {
			m.Unusable = "libvirt's monitor (inherited fd " + clip(fd) + "): the VM is libvirt's"
		}
		return
	}
	p, ok := get(opts, "path")
	if !ok {
		m.Unusable = "a TCP socket: fds can be passed only over a unix socket"
		return
	}
	m.Path = p
	m.Abstract = boolOpt(opts, "abstract", false)
	switch {
	case p == "":
		m.Unusable = "no socket path"
	case m.Libvirt:
		m.Unusable = "libvirt's monitor: libvirtd holds its one connection while the VM runs"
	case !m.Server:
		m.Unusable = "QEMU connects out to this socket (no server=on): whoever listens there holds the monitor"
	}
}

// clip shortens outside text for an error message.
func clip(s string) string {
	if len(s) > 64 {
		return strconv.Quote(s[:64]) + "..."
	}
	return s
}
