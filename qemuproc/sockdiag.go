package qemuproc

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Who holds a busy monitor: the kernel's unix sock_diag (include/uapi/
// linux/unix_diag.h) lists the listening and established unix sockets of
// this network namespace with their bound name and their peer's inode. QEMU's end of
// the current connection is a socket in QEMU's /proc/PID/fd that carries
// the monitor's path (an accepted socket shares its listener's name); its
// peer inode is found in the holder's /proc/PID/fd.

const (
	udiagShowName  = 0x01 // UDIAG_SHOW_NAME
	udiagShowPeer  = 0x04 // UDIAG_SHOW_PEER
	unixDiagName   = 0    // UNIX_DIAG_NAME
	unixDiagPeer   = 2    // UNIX_DIAG_PEER
	tcpEstablished = 1    // TCP_ESTABLISHED: unix sockets use the TCP states
	tcpListen      = 10   // TCP_LISTEN

	unixDiagMsgLen = 16 // struct unix_diag_msg
	maxDiagReads   = 1 << 14
)

// unixSock is one socket of a sock_diag reply.
type unixSock struct {
	Ino, Peer uint32
	State     uint8
	Name      string // bound name; an abstract one starts with "@"
}

// parseUnixDiag reads the payload of one SOCK_DIAG_BY_FAMILY reply
// (struct unix_diag_msg, then netlink attributes). It is outside input:
// every length is checked.
func parseUnixDiag(b []byte) (unixSock, error) {
	if len(b) < unixDiagMsgLen {
		return unixSock{}, fmt.Errorf("qemuproc: sock_diag reply of %d bytes, want at least %d: %w", len(b), unixDiagMsgLen, ErrInvalid)
	}
	s := unixSock{State: b[2], Ino: binary.NativeEndian.Uint32(b[4:8])}
	for a := b[unixDiagMsgLen:]; len(a) >= 4; {
		l := int(binary.NativeEndian.Uint16(a[0:2]))
		typ := binary.NativeEndian.Uint16(a[2:4]) &^ 0xc000 // NLA_F_NESTED, NLA_F_NET_BYTEORDER
		if l < 4 || l > len(a) {
			return unixSock{}, fmt.Errorf("qemuproc: sock_diag attribute length %d of %d bytes left: %w", l, len(a), ErrInvalid)
		}
		v := a[4:l]
		switch typ {
		case unixDiagName:
			if len(v) > 0 && v[0] == 0 {
				s.Name = "@" + string(v[1:])
			} else {
				s.Name = strings.TrimRight(string(v), "\x00")
			}
		case unixDiagPeer:
			if len(v) >= 4 {
				s.Peer = binary.NativeEndian.Uint32(v[:4])
			}
		}
		al := (l + 3) &^ 3
		if al > len(a) {
			break
		}
		a = a[al:]
	}
	return s, nil
}

// parseNetlink splits a netlink datagram into (type, payload) messages.
func parseNetlink(b []byte, fn func(typ uint16, payload []byte) error) error {
	for len(b) >= unix.NLMSG_HDRLEN {
		l := int(binary.NativeEndian.Uint32(b[0:4]))
		typ := binary.NativeEndian.Uint16(b[4:6])
		if l < unix.NLMSG_HDRLEN || l > len(b) {
			return fmt.Errorf("qemuproc: netlink message length %d of %d bytes: %w", l, len(b), ErrInvalid)
		}
		if err := fn(typ, b[unix.NLMSG_HDRLEN:l]); err != nil {
			return err
		}
		al := (l + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1)
		if al >= len(b) {
			return nil
		}
		b = b[al:]
	}
	return nil
}

// unixSockets calls fn for every listening or established unix socket in
// the calling thread's network namespace.
func unixSockets(fn func(unixSock)) error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return fmt.Errorf("qemuproc: sock_diag socket: %w", err)
	}
	defer unix.Close(fd)
	req := make([]byte, unix.NLMSG_HDRLEN+24) // nlmsghdr + struct unix_diag_req
	binary.NativeEndian.PutUint32(req[0:4], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:6], unix.SOCK_DIAG_BY_FAMILY)
	binary.NativeEndian.PutUint16(req[6:8], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	binary.NativeEndian.PutUint32(req[8:12], 1)
	r := req[unix.NLMSG_HDRLEN:]
	r[0] = unix.AF_UNIX
	binary.NativeEndian.PutUint32(r[4:8], 1<<tcpEstablished|1<<tcpListen)
	binary.NativeEndian.PutUint32(r[12:16], udiagShowName|udiagShowPeer)
	binary.NativeEndian.PutUint32(r[16:20], ^uint32(0)) // INET_DIAG_NOCOOKIE
	binary.NativeEndian.PutUint32(r[20:24], ^uint32(0))
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("qemuproc: sock_diag request: %w", err)
	}
	buf := make([]byte, 1<<16)
	for range maxDiagReads {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return fmt.Errorf("qemuproc: sock_diag reply: %w", err)
		}
		done := false
		err = parseNetlink(buf[:n], func(typ uint16, p []byte) error {
			switch typ {
			case unix.NLMSG_DONE:
				done = true
			case unix.NLMSG_ERROR:
				done = true
				if len(p) >= 4 {
					if e := int32(binary.NativeEndian.Uint32(p[:4])); e < 0 {
						return fmt.Errorf("qemuproc: sock_diag: %w", unix.Errno(-e))
					}
				}
			case unix.SOCK_DIAG_BY_FAMILY:
				s, err := parseUnixDiag(p)
				if err != nil {
					return err
				}
				fn(s)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if done {
			return nil
		}
	}
	return fmt.Errorf("qemuproc: sock_diag reply longer than %d reads: %w", maxDiagReads, ErrInvalid)
}

// socketInodes returns the socket inodes among pid's open fds.
func socketInodes(pid int) map[uint32]bool {
	dir := filepath.Join(procRoot, strconv.Itoa(pid), "fd")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	set := map[uint32]bool{}
	for _, e := range ents {
		l, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		if s, ok := strings.CutPrefix(l, "socket:["); ok {
			if n, err := strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 32); err == nil {
				set[uint32(n)] = true
			}
		}
	}
	return set
}

// monitorClients returns the peer inodes of QEMU's established
// connections on monitor m; ok is false when netctl cannot tell (QEMU's
// fds unreadable without root, sock_diag refused, a socket in another
// network namespace).
func monitorClients(qemuPID int, m Monitor) (peers map[uint32]bool, ok bool) {
	if m.Path == "" {
		return nil, false
	}
	want := m.Path
	if m.Abstract {
		want = "@" + m.Path
	}
	ours := socketInodes(qemuPID)
	if len(ours) == 0 {
		return nil, false
	}
	// QEMU's listener must show up too: otherwise sock_diag looked in
	// another network namespace than QEMU's sockets live in.
	peers = map[uint32]bool{}
	listening := false
	if err := unixSockets(func(s unixSock) {
		switch {
		case !ours[s.Ino] || s.Name != want:
		case s.State == tcpListen:
			listening = true
		case s.State == tcpEstablished && s.Peer != 0:
			peers[s.Peer] = true
		}
	}); err != nil || !listening {
		return nil, false
	}
	return peers, true
}

// holder names the processes at the other end of QEMU's current
// connection on monitor m ("pid 123 (socat)", "this process (pid 9)"),
// or "" when it cannot tell (see monitorClients) or the peer is in no
// process's fd table (in flight in an SCM_RIGHTS message, or closed a
// moment ago).
func holder(qemuPID int, m Monitor) string {
	peers, ok := monitorClients(qemuPID, m)
	if !ok || len(peers) == 0 {
		return ""
	}
	ents, err := os.ReadDir(procRoot)
	if err != nil {
		return ""
	}
	var who []string
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == qemuPID {
			continue
		}
		for ino := range socketInodes(pid) {
			if peers[ino] {
				who = append(who, describe(pid))
				break
			}
		}
	}
	return strings.Join(who, ", ")
}

// describe names a process for a message.
func describe(pid int) string {
	if pid == os.Getpid() {
		return fmt.Sprintf("this process (pid %d)", pid)
	}
	comm, err := readBounded(filepath.Join(procRoot, strconv.Itoa(pid), "comm"), 64)
	name := strings.TrimSpace(string(comm))
	if err != nil || name == "" {
		return fmt.Sprintf("pid %d", pid)
	}
	switch {
	case name == "netctl":
		return fmt.Sprintf("another netctl (pid %d)", pid)
	case name == "libvirtd" || name == "virtqemud":
		return fmt.Sprintf("libvirt's %s (pid %d)", name, pid)
	}
	return fmt.Sprintf("pid %d (%s)", pid, name)
}
