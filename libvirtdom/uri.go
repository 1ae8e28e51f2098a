package libvirtdom

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/netctl/netctl/internal/errs"
)

// DefaultURI is the URI Dial uses for "": the system QEMU driver.
const DefaultURI = "qemu:///system"

// maxURI bounds a URI from the command line.
const maxURI = 4096

// Target is where a URI leads: the unix socket to dial (Sockets lists
// the candidates in order when the URI names none; Socket is the first
// that exists, else the first), and the URI to open over it.
type Target struct {
	Socket  string
	Sockets []string
	Open    string // "qemu:///system" or "qemu:///session"
}

// ParseURI resolves uri (DefaultURI when "") the way libvirt's remote
// driver does for a local daemon: qemu:///system and qemu+unix:///system
// dial virtqemud's socket (/run/libvirt/virtqemud-sock) where the modular
// daemons run, else libvirtd's (/run/libvirt/libvirt-sock); ?socket=PATH
// names the socket (an absolute path); qemu:///session uses
// $XDG_RUNTIME_DIR/libvirt. Other transports (ssh, tcp, tls) and drivers
// are refused: netctl acts on the host it runs on. Errors wrap
// errs.ErrInvalid.
func ParseURI(uri string) (Target, error) {
	return parseURI(uri, func(p string) bool { _, err := os.Stat(p); return err == nil })
}

func parseURI(uri string, exists func(string) bool) (Target, error) {
	if uri == "" {
		uri = DefaultURI
	}
	if len(uri) > maxURI {
		return Target{}, fmt.Errorf("libvirt URI of %d bytes: %w", len(uri), errs.ErrInvalid)
	}
	u, err := url.Parse(uri)
	if err != nil {
		return Target{}, fmt.Errorf("libvirt URI %s: %v: use qemu:///system or qemu+unix:///system?socket=PATH: %w", clip(uri), err, errs.ErrInvalid)
	}
	switch u.Scheme {
	case "qemu", "qemu+unix":
	default:
		return Target{}, fmt.Errorf("libvirt URI %s: netctl talks to the QEMU driver of this host only (qemu:///system or qemu+unix:///system?socket=PATH): %w", clip(uri), errs.ErrInvalid)
	}
	if u.Host != "" || u.User != nil {
		return Target{}, fmt.Errorf("libvirt URI %s: names host %s; netctl manages this host only: drop the host (qemu:///system): %w", clip(uri), clip(u.Host), errs.ErrInvalid)
	}
	var t Target
	var dir string
	switch u.Path {
	case "/system":
		t.Open, dir = "qemu:///system", "/run/libvirt"
	case "/session":
		t.Open = "qemu:///session"
		rt := os.Getenv("XDG_RUNTIME_DIR")
		if rt == "" {
			return Target{}, fmt.Errorf("libvirt URI %s: no $XDG_RUNTIME_DIR for the session daemon's socket: give it with ?socket=PATH: %w", clip(uri), errs.ErrInvalid)
		}
		dir = filepath.Join(rt, "libvirt")
	default:
		return Target{}, fmt.Errorf("libvirt URI %s: path %s: use /system or /session: %w", clip(uri), clip(u.Path), errs.ErrInvalid)
	}
	q := u.Query()
	for k := range q {
		if k != "socket" {
			return Target{}, fmt.Errorf("libvirt URI %s: parameter %s: netctl knows only socket=PATH: %w", clip(uri), clip(k), errs.ErrInvalid)
		}
	}
	if s := q.Get("socket"); s != "" {
		if !filepath.IsAbs(s) {
			return Target{}, fmt.Errorf("libvirt URI %s: socket %s: give an absolute path: %w", clip(uri), clip(s), errs.ErrInvalid)
		}
		t.Socket, t.Sockets = s, []string{s}
		return t, nil
	}
	t.Sockets = []string{filepath.Join(dir, "virtqemud-sock"), filepath.Join(dir, "libvirt-sock")}
	t.Socket = t.Sockets[0]
	for _, s := range t.Sockets {
		if exists(s) {
			t.Socket = s
			break
		}
	}
	return t, nil
}

// clip bounds a string from outside for a message: at most 64 bytes, no
// control characters.
func clip(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}
