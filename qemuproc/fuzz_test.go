package qemuproc

import (
	"bytes"
	"encoding/binary"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/fuzzalloc"
)

// FuzzParseCmdline feeds /proc/PID/cmdline contents (NUL-separated) to
// SplitCmdline and ParseCmdline: no panic, bounded output, and every
// monitor either usable with a path or saying why not.
func FuzzParseCmdline(f *testing.F) {
	f.Add([]byte(strings.Join(argsFile(f, "testdata/libvirt-boot-network.x86_64-latest.args"), "\x00") + "\x00"))
	for _, s := range []string{
		"/usr/bin/qemu-kvm\x00-name\x00guest=fedora28,debug-threads=on\x00-chardev\x00socket,id=charmonitor,path=/var/lib/libvirt/qemu/domain-41-fedora28/monitor.sock,server,nowait\x00-mon\x00chardev=charmonitor,id=monitor,mode=control\x00",
		"qemu-system-x86_64\x00-S\x00-nodefaults\x00-machine\x00pc\x00-display\x00none\x00-name\x00guest=a,,b,debug-threads=on\x00-qmp\x00unix:/tmp/q1,server=on,wait=off\x00-qmp-pretty\x00unix:rel,server,nowait\x00",
		"qemu-system-x86_64\x00-chardev\x00socket,id=m,path=x,abstract=on,server=on\x00-mon\x00m,mode=control\x00-qmp\x00tcp:localhost:4444,server\x00-daemonize\x00-chroot\x00/j\x00",
		"qemu-system-x86_64\x00-mon\x00chardev=,mode=control\x00-chardev\x00,,,=,\x00-name\x00,\x00-qmp\x00unix:\x00",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var argv []string
		var c Cmdline
		var err error
		fuzzalloc.Check(t, len(raw), func() {
			argv, _ = SplitCmdline(raw)
			c, err = ParseCmdline(argv)
		})
		if len(argv) > MaxArgs {
			t.Fatalf("%d args", len(argv))
		}
		if err != nil {
			return
		}
		if len(c.Monitors) > MaxMonitors {
			t.Fatalf("%d monitors", len(c.Monitors))
		}
		for _, m := range c.Monitors {
			if m.Unusable == "" && (m.Path == "" && !m.Abstract || !m.Server) {
				t.Errorf("monitor %+v usable without a server socket path", m)
			}
		}
	})
}

// FuzzParseUnixDiag feeds sock_diag replies (netlink datagrams) to the
// parsers Dial uses to name a busy monitor's holder. Seeds: the first
// datagram of the running kernel's reply to the request unixSockets
// sends (read live, with a listening socket and a connected pair of this
// test's own in it), and replies built as the kernel writes them.
func FuzzParseUnixDiag(f *testing.F) {
	f.Add(liveUnixDiag(f))
	f.Add(diagReply(7, 9, "/run/vm/qmp.sock"))
	f.Add(diagReply(1, 0, "\x00abstract"))
	f.Add([]byte{20, 0, 0, 0, 3, 0, 2, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}) // NLMSG_DONE
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzalloc.Check(t, len(b), func() {
			parseNetlink(b, func(typ uint16, p []byte) error {
				if len(p) > len(b) {
					t.Fatalf("payload %d of %d", len(p), len(b))
				}
				parseUnixDiag(p)
				return nil
			})
		})
	})
}

// diagReply builds a one-message SOCK_DIAG_BY_FAMILY reply, as the kernel
// writes it (net/unix/diag.c: unix_diag_msg, UNIX_DIAG_NAME, UNIX_DIAG_PEER).
func diagReply(ino, peer uint32, name string) []byte {
	var p bytes.Buffer
	msg := make([]byte, unixDiagMsgLen)
	msg[0], msg[1], msg[2] = 1, 1, tcpEstablished // AF_UNIX, SOCK_STREAM
	binary.NativeEndian.PutUint32(msg[4:], ino)
	p.Write(msg)
	attr := func(typ uint16, v []byte) {
		h := make([]byte, 4)
		binary.NativeEndian.PutUint16(h[0:], uint16(4+len(v)))
		binary.NativeEndian.PutUint16(h[2:], typ)
		p.Write(h)
		p.Write(v)
		for p.Len()%4 != 0 {
			p.WriteByte(0)
		}
	}
	attr(unixDiagName, []byte(name))
	if peer != 0 {
		v := make([]byte, 4)
		binary.NativeEndian.PutUint32(v, peer)
		attr(unixDiagPeer, v)
	}
	h := make([]byte, 16)
	binary.NativeEndian.PutUint32(h[0:], uint32(16+p.Len()))
	binary.NativeEndian.PutUint16(h[4:], 20) // SOCK_DIAG_BY_FAMILY
	return append(h, p.Bytes()...)
}

// FuzzParseStatStartTime feeds /proc/PID/stat lines, seeded with this
// process's own and a QEMU's.
func FuzzParseStatStartTime(f *testing.F) {
	if b, err := readBounded("/proc/self/stat", 4096); err == nil {
		f.Add(b)
	}
	f.Add([]byte("4242 (qemu-system-x86) S 1 4242 4242 0 -1 4194560 5939 0 0 0 9 10 0 0 20 0 5 0 98765432 1234567168 12000 18446744073709551615 1 1 0 0 0 0 0 4096 17003 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n"))
	f.Add([]byte("1 (a) b) c) S"))
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzalloc.Check(t, len(b), func() { ParseStatStartTime(b) })
	})
}

// liveUnixDiag sends unixSockets' request (listening and established unix
// sockets, with names and peers) to the running kernel and returns the
// first datagram of its reply, after making a listening socket and a
// connected pair so that the reply holds both kinds.
func liveUnixDiag(f *testing.F) []byte {
	f.Helper()
	ln, err := net.Listen("unix", filepath.Join(f.TempDir(), "qmp.sock"))
	if err != nil {
		f.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("unix", ln.Addr().String())
	if err != nil {
		f.Fatal(err)
	}
	defer c.Close()
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		f.Fatal(err)
	}
	defer unix.Close(fd)
	req := make([]byte, unix.NLMSG_HDRLEN+24)
	binary.NativeEndian.PutUint32(req[0:4], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:6], unix.SOCK_DIAG_BY_FAMILY)
	binary.NativeEndian.PutUint16(req[6:8], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	r := req[unix.NLMSG_HDRLEN:]
	r[0] = unix.AF_UNIX
	binary.NativeEndian.PutUint32(r[4:8], 1<<tcpEstablished|1<<tcpListen)
	binary.NativeEndian.PutUint32(r[12:16], udiagShowName|udiagShowPeer)
	binary.NativeEndian.PutUint32(r[16:20], ^uint32(0))
	binary.NativeEndian.PutUint32(r[20:24], ^uint32(0))
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		f.Fatal(err)
	}
	buf := make([]byte, 1<<16)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		f.Fatal(err)
	}
	socks := 0
	err = parseNetlink(buf[:n], func(typ uint16, p []byte) error {
		if typ == unix.SOCK_DIAG_BY_FAMILY {
			if _, err := parseUnixDiag(p); err != nil {
				return err
			}
			socks++
		}
		return nil
	})
	if err != nil || socks == 0 {
		f.Fatalf("the kernel's sock_diag reply (%d bytes): %d sockets, %v", n, socks, err)
	}
	return buf[:n]
}
