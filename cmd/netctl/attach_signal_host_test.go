package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/testenv"
)

// stuckQMP is a QMP server that answers what attach reads, takes getfd,
// and gets stuck at netdev_add (a QEMU stuck in vhost setup): it sends on
// netdevAdd and logs every command after it. Like QEMU it answers in
// order: the commands after netdev_add are answered only once netdev_add
// is, which happens when the rollback's netdev_del comes (QEMU came
// unstuck; the netdev_add failed).
type stuckQMP struct {
	sock      string
	netdevAdd chan struct{} // one value per netdev_add
	mu        sync.Mutex
	after     []string // commands after netdev_add, with their fdname
	all       []string // every command on every connection, with its fdname
}

func newStuckQMP(t *testing.T) *stuckQMP {
	s := &stuckQMP{sock: filepath.Join(t.TempDir(), "qmp.sock"), netdevAdd: make(chan struct{}, 16)}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: s.sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.AcceptUnix()
			if err != nil {
				return
			}
			s.serve(c)
		}
	}()
	return s
}

func (s *stuckQMP) serve(c *net.UnixConn) {
	defer c.Close()
	c.Write([]byte(`{"QMP": {"version": {"qemu": {"micro": 0, "minor": 2, "major": 7}, "package": ""}, "capabilities": []}}` + "\n"))
	buf, oob := make([]byte, 64<<10), make([]byte, 256)
	var acc []byte
	stuck := false
	var held [][]byte // replies held behind the stuck netdev_add's, in order
	for {
		n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
		if err != nil || n == 0 {
			return
		}
		if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
			for _, m := range msgs {
				fds, _ := unix.ParseUnixRights(&m)
				for _, fd := range fds {
					unix.Close(fd)
				}
			}
		}
		acc = append(acc, buf[:n]...)
		for {
			i := bytes.IndexByte(acc, '\n')
			if i < 0 {
				break
			}
			var req struct {
				Execute   string          `json:"execute"`
				Arguments map[string]any  `json:"arguments"`
				ID        json.RawMessage `json:"id"`
			}
			json.Unmarshal(acc[:i], &req)
			acc = acc[i+1:]
			name, _ := req.Arguments["fdname"].(string)
			s.mu.Lock()
			if stuck {
				s.after = append(s.after, strings.TrimSpace(req.Execute+" "+name))
			}
			s.all = append(s.all, strings.TrimSpace(req.Execute+" "+name))
			s.mu.Unlock()
			var ret any = map[string]any{}
			var qerr map[string]string
			switch req.Execute {
			case "query-version":
				ret = map[string]any{"qemu": map[string]int{"major": 7, "minor": 2, "micro": 0}, "package": ""}
			case "query-name":
				ret = map[string]string{"name": "sigvm"}
			case "qom-get":
				ret = "pc-i440fx-7.2-machine"
			case "human-monitor-command":
				ret = ""
			case "qom-list", "query-fdsets":
				ret = []any{}
			case "netdev_add":
				stuck = true
				s.netdevAdd <- struct{}{}
				b, _ := json.Marshal(map[string]any{"error": map[string]string{"class": "GenericError", "desc": "vhost setup failed"}, "id": req.ID})
				held = [][]byte{b} // answered when it comes unstuck
				continue
			case "netdev_del":
				qerr = map[string]string{"class": "DeviceNotFound", "desc": "Device 'netctl-n1' not found"}
			}
			var b []byte
			if qerr != nil {
				b, _ = json.Marshal(map[string]any{"error": qerr, "id": req.ID})
			} else {
				b, _ = json.Marshal(map[string]any{"return": ret, "id": req.ID})
			}
			if held != nil && req.Execute != "netdev_del" {
				held = append(held, b)
				continue
			}
			w := bufio.NewWriter(c)
			for _, h := range held {
				w.Write(append(h, '\n'))
			}
			held = nil
			w.Write(append(b, '\n'))
			if w.Flush() != nil {
				return
			}
		}
	}
}

// TestHostAttachInterrupted: Ctrl-C (SIGINT) or SIGTERM while netctl
// attach waits on QEMU must roll back like any failure: closefd for the
// getfd names it passed (each holds a tap queue in QEMU), netdev_del, no
// record, exit 1 saying it was interrupted. Before the fix the signal
// killed netctl at once: nothing was undone.
func TestHostAttachInterrupted(t *testing.T) {
	testenv.Host(t)
	bin := netctlBinary(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			run := filepath.Join(t.TempDir(), "run")
			q := newStuckQMP(t)
			cmd := exec.Command(bin, "attach", "--qmp", q.sock, "--id", "n1", "--backend", "userspace")
			cmd.Env = append(os.Environ(), "NETCTL_RUN_DIR="+run)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-q.netdevAdd:
			case <-time.After(60 * time.Second):
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("netctl attach never reached netdev_add: %s", stderr.String())
			}
			cmd.Process.Signal(sig)
			cmd.Wait()
			code := cmd.ProcessState.ExitCode()
			t.Logf("netctl attach, %v at netdev_add: exit %d, stderr %s", sig, code, stderr.String())
			q.mu.Lock()
			after := strings.Join(q.after, ", ")
			q.mu.Unlock()
			if code != 1 || !strings.HasPrefix(stderr.String(), "netctl: attach: interrupted: netdev_add netctl-n1") {
				t.Errorf("exit %d (%v), stderr %q; want exit 1 saying it was interrupted", code, cmd.ProcessState, stderr.String())
			}
			if !strings.Contains(after, "netdev_del") || !strings.Contains(after, "closefd netctl-n1-tap0") {
				t.Errorf("after %v QEMU got %q; want netdev_del and closefd netctl-n1-tap0 (the rollback)", sig, after)
			}
			if es, _ := os.ReadDir(filepath.Join(run, "nics")); len(es) != 0 {
				t.Errorf("records left: %v", es)
			}
		})
	}
}
