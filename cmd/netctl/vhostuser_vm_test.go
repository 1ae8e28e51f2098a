package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/test/prom"
	"github.com/netctl/netctl/vhostuser"
	"github.com/netctl/netctl/virtio"
)

// eventually polls cond for up to a minute (a wait, not a timed assertion).
func eventually(cond func() bool) bool {
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return false
}

// vuHandshake connects to the bridge as a front-end and negotiates
// features with REPLY_ACK; it returns the open connection.
func vuHandshake(t *testing.T, sock string) *net.UnixConn {
	t.Helper()
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(time.Minute))
	call := func(r vhostuser.Request, b vhostuser.Body, flags vhostuser.Flags) []byte {
		t.Helper()
		m := vhostuser.NewMessage(r, b)
		m.Flags |= flags
		if err := vhostuser.WriteMessage(c, m); err != nil {
			t.Fatal(err)
		}
		rep, err := vhostuser.ReadMessage(c)
		if err != nil {
			t.Fatalf("%v: %v", r, err)
		}
		rep.CloseFDs()
		if rep.Request != r || len(rep.Payload) != 8 {
			t.Fatalf("%v: reply %v", r, rep)
		}
		return rep.Payload
	}
	u64 := func(b []byte) uint64 {
		var v uint64
		for i := 7; i >= 0; i-- {
			v = v<<8 | uint64(b[i])
		}
		return v
	}
	offered := virtio.Features(u64(call(vhostuser.GetFeatures, nil, 0)))
	if !offered.Has(virtio.Version1) || uint64(offered)&vhostuser.FeatureProtocolFeatures == 0 {
		t.Fatalf("offered %v", offered)
	}
	call(vhostuser.GetProtocolFeatures, nil, 0)
	if err := vhostuser.WriteMessage(c, vhostuser.NewMessage(vhostuser.SetProtocolFeatures, vhostuser.U64(vhostuser.ProtocolReplyAck))); err != nil {
		t.Fatal(err)
	}
	if v := u64(call(vhostuser.SetFeatures, vhostuser.U64(virtio.Version1|virtio.NetMrgRxbuf|virtio.Features(vhostuser.FeatureProtocolFeatures)), vhostuser.FlagNeedReply)); v != 0 {
		t.Fatalf("SET_FEATURES refused: %d", v)
	}
	return c
}

// vuRefused sends n SET_VRING_NUM with a size that is not a power of
// two, each with NEED_REPLY, and checks that each is refused with a
// failure REPLY_ACK (REPLY_ACK negotiated: vuHandshake).
func vuRefused(t *testing.T, c *net.UnixConn, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		m := vhostuser.NewMessage(vhostuser.SetVringNum, vhostuser.VringState{Index: 0, Num: 3})
		m.Flags |= vhostuser.FlagNeedReply
		if err := vhostuser.WriteMessage(c, m); err != nil {
			t.Fatal(err)
		}
		rep, err := vhostuser.ReadMessage(c)
		if err != nil {
			t.Fatalf("SET_VRING_NUM 3: %v", err)
		}
		rep.CloseFDs()
		if rep.Request != vhostuser.SetVringNum || len(rep.Payload) != 8 || rep.Payload[0] == 0 {
			t.Fatalf("SET_VRING_NUM 3: reply %v, want a failure REPLY_ACK", rep)
		}
	}
}

func procStatus(pid int) map[string]string {
	b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	st := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			st[k] = strings.TrimSpace(v)
		}
	}
	return st
}

// TestVMVhostUser runs netctl vhost-user as root with --owner 65534 on the
// VM's vhost-net: it drops to nobody, answers a front-end, keeps the
// status file, and on SIGTERM exits 0 leaving no socket, no status file
// and no tap or macvtap it created (the reaper deletes what needs root).
// Subtest reaper-killed: the reaper killed, the bridge warns and serves on.
func TestVMVhostUser(t *testing.T) {
	testenv.VM(t)
	testenv.Host(t)
	for _, c := range []struct {
		name    string
		backend []string
		link    func(st vhostuser.Status) string
	}{
		{"tap", []string{"--tap", "vucli0", "--queues", "2"}, func(vhostuser.Status) string { return "vucli0" }},
		{"macvtap", []string{"--macvtap", "vulower0:bridge"}, func(st vhostuser.Status) string { return strings.TrimPrefix(st.Backend, "macvtap ") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "macvtap" {
				if err := netlink.LinkAdd(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: "vulower0"}}); err != nil {
					t.Fatal(err)
				}
				defer netlink.LinkDel(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: "vulower0"}})
				if l, err := netlink.LinkByName("vulower0"); err == nil {
					netlink.LinkSetUp(l)
				}
			}
			dir := t.TempDir() // root's, 0700: the dropped bridge cannot remove its socket here; the reaper does
			sock := filepath.Join(dir, "vu.sock")
			statusDir, err := os.MkdirTemp("", "vustatus")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(statusDir)
			os.Chown(statusDir, 65534, 65534) // the dropped process rewrites the file there
			status := filepath.Join(statusDir, "vu.json")
			args := append([]string{"vhost-user", "--socket", sock, "--owner", "65534:65534", "--json-status", status, "--handshake-timeout", "2s"}, c.backend...)
			cmd := asNetctl(args...)
			var out prom.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			defer func() {
				cmd.Process.Kill()
				t.Logf("netctl %s:\n%s", strings.Join(args, " "), out.String())
			}()
			if !eventually(func() bool { _, err := os.Stat(status); return err == nil }) {
				t.Fatal("no status file: the bridge did not start")
			}
			var st vhostuser.Status
			var fi os.FileInfo
			readStatus := func() vhostuser.Status {
				var st vhostuser.Status
				b, _ := os.ReadFile(status)
				json.Unmarshal(b, &st)
				return st
			}
			st = readStatus()
			link := c.link(st)
			if _, err := net.InterfaceByName(link); err != nil {
				t.Fatalf("backend %q: %v", st.Backend, err)
			}
			fi, err = os.Lstat(sock)
			if err != nil || fi.Mode().Perm() != 0o600 || fi.Sys().(*syscall.Stat_t).Uid != 65534 {
				t.Fatalf("socket: %v %v", err, fi)
			}
			// A front-end that connects and says nothing is dropped
			// after --handshake-timeout, the log saying why.
			silent, err := net.Dial("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			silent.SetReadDeadline(time.Now().Add(time.Minute))
			t0 := time.Now()
			if n, err := silent.Read(make([]byte, 1)); err == nil || time.Since(t0) < 2*time.Second {
				t.Errorf("the silent front-end: read %d, %v after %v; want the bridge to close it after 2 s", n, err, time.Since(t0))
			}
			silent.Close()
			if !eventually(func() bool { return strings.Contains(out.String(), "front-end dropped: it sent nothing for 2s") }) {
				t.Errorf("the log does not say why the silent front-end was dropped")
			}
			conn := vuHandshake(t, sock)
			if !eventually(func() bool { st = readStatus(); return st.Connected && st.Features != "" }) {
				t.Fatalf("status %+v: want the front-end connected with its features", st)
			}
			// Past its handshake, it may be silent longer than that.
			time.Sleep(3 * time.Second)
			if st = readStatus(); !st.Connected || st.FrontendPID != os.Getpid() {
				t.Fatalf("status %+v: a front-end past its handshake was dropped for being silent", st)
			}
			if st.FrontendPID != os.Getpid() || !strings.Contains(strings.Join(st.FeatureNames, " "), "VERSION_1") {
				t.Errorf("status %+v", st)
			}
			// A chatty front-end: the same refused request again and
			// again (REPLY_ACK keeps the connection). The status file
			// is rewritten once, for the new last error, not once per
			// message, and the warnings are rate-limited.
			vuRefused(t, conn, 1)
			if !eventually(func() bool { st = readStatus(); return st.LastError != "" }) {
				t.Fatalf("status %+v: want the refusal as the last error", st)
			}
			ino := func() uint64 {
				fi, err := os.Lstat(status)
				if err != nil {
					t.Fatal(err)
				}
				return fi.Sys().(*syscall.Stat_t).Ino
			}
			ino0 := ino()
			vuRefused(t, conn, 300)
			if ino() != ino0 {
				t.Error("300 refused requests that changed nothing rewrote the status file")
			}
			if n := strings.Count(out.String(), "request refused"); n > 10 {
				t.Errorf("301 refused requests logged %d warnings, want them rate-limited", n)
			}
			ps := procStatus(cmd.Process.Pid)
			if !strings.HasPrefix(ps["Uid"], "65534\t65534\t65534") || ps["CapEff"] != "0000000000000000" || ps["CapBnd"] != "0000000000000000" {
				t.Errorf("the bridge runs with Uid %q CapEff %q CapBnd %q: want nobody and no capabilities", ps["Uid"], ps["CapEff"], ps["CapBnd"])
			}
			conn.Close()
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if err := <-exited; err != nil {
				t.Fatalf("netctl vhost-user after SIGTERM: %v", err)
			}
			gone := func(path string) bool { _, err := os.Lstat(path); return errors.Is(err, os.ErrNotExist) }
			if !eventually(func() bool { return gone(sock) }) {
				t.Error("the socket is still there")
			}
			if !eventually(func() bool { _, err := net.InterfaceByName(link); return err != nil }) {
				t.Errorf("%s is still there", link)
			}
			if !gone(status) {
				t.Error("the status file is still there")
			}
		})
	}
	t.Run("reaper-killed", vhostUserReaperKilled)
}

// childPID is the pid of pid's child whose command line holds arg.
func childPID(pid int, arg string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cl, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if procStatus(n)["PPid"] == strconv.Itoa(pid) && bytes.Contains(cl, []byte("\x00"+arg+"\x00")) {
			return n
		}
	}
	return 0
}

// vhostUserReaperKilled: netctl vhost-user --owner on a macvtap it made,
// whose root reaper is killed (SIGKILL: it ignores the others). The
// bridge says at once, on stderr and in the status file, that the socket
// and the macvtap will be left and how to remove them; it serves a
// front-end after that and exits 0 on SIGTERM, leaving the two as it
// said.
func vhostUserReaperKilled(t *testing.T) {
	lower := &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: "vulower1"}}
	if err := netlink.LinkAdd(lower); err != nil {
		t.Fatal(err)
	}
	defer netlink.LinkDel(lower)
	if l, err := netlink.LinkByName("vulower1"); err == nil {
		netlink.LinkSetUp(l)
	}
	sock := filepath.Join(t.TempDir(), "vu.sock")
	statusDir, err := os.MkdirTemp("", "vustatus")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(statusDir)
	os.Chown(statusDir, 65534, 65534)
	status := filepath.Join(statusDir, "vu.json")
	args := []string{"vhost-user", "--socket", sock, "--owner", "65534:65534", "--json-status", status, "--macvtap", "vulower1:bridge"}
	cmd := asNetctl(args...)
	var stdout, stderr prom.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Kill()
		t.Logf("netctl %s:\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), stdout.String(), stderr.String())
	}()
	type statusFile struct {
		vhostuser.Status
		Warnings []string `json:"warnings"`
	}
	readStatus := func() statusFile {
		var st statusFile
		b, _ := os.ReadFile(status)
		json.Unmarshal(b, &st)
		return st
	}
	if !eventually(func() bool { _, err := os.Stat(status); return err == nil }) {
		t.Fatal("no status file: the bridge did not start")
	}
	link := strings.TrimPrefix(readStatus().Backend, "macvtap ")
	var reaper int
	if !eventually(func() bool { reaper = childPID(cmd.Process.Pid, "vhost-user-reap"); return reaper != 0 }) {
		t.Fatal("the bridge has no vhost-user-reap child")
	}
	if err := syscall.Kill(reaper, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("vhost-user: warning: the cleanup helper (pid %d) died (signal: killed): on exit the socket %s and macvtap %s will be left; "+
		"remove them as root with 'rm -f %s' and 'ip link delete %s'", reaper, sock, link, sock, link)
	if !eventually(func() bool { return strings.Contains(stderr.String(), "netctl "+want+"\n") }) {
		t.Fatalf("stderr has no line %q", "netctl "+want)
	}
	if !eventually(func() bool { w := readStatus().Warnings; return len(w) == 1 && w[0] == want }) {
		t.Errorf("status file warnings %q, want [%q]", readStatus().Warnings, want)
	}
	// It serves on: a front-end connects and negotiates.
	conn := vuHandshake(t, sock)
	var st statusFile
	if !eventually(func() bool { st = readStatus(); return st.Connected && st.Features != "" }) {
		t.Fatalf("status %+v: want the front-end connected with its features", st)
	}
	if len(st.Warnings) != 1 || st.FrontendPID != os.Getpid() {
		t.Errorf("status after the front-end came: %+v", st)
	}
	conn.Close()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		t.Fatalf("netctl vhost-user after SIGTERM: %v", err)
	}
	if strings.Contains(stderr.String(), "panic") {
		t.Errorf("stderr mentions a panic")
	}
	// Left as the warning said; removed here as it says.
	if _, err := os.Lstat(sock); err != nil {
		t.Errorf("the socket: %v; the warning said it would be left", err)
	}
	if _, err := net.InterfaceByName(link); err != nil {
		t.Errorf("macvtap %s: %v; the warning said it would be left", link, err)
	}
	os.Remove(sock)
	if l, err := netlink.LinkByName(link); err == nil {
		netlink.LinkDel(l)
	}
}
