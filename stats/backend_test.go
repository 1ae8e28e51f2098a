package stats

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/qmp"
)

// TestDescribeNICBackend: the backend label of a NIC found over QMP
// stays what it is while vhost is stopped (the VM paused, its link
// down: QEMU reports vhost-started and vhost-dev only while vhost runs):
// a tap whose QEMU holds a /dev/vhost-net fd no running NIC accounts for
// is vhost-net; a tap in a QEMU without one is userspace; a vhost-user
// netdev is vhost-user, never vhost-net, and gets no vhost source.
func TestDescribeNICBackend(t *testing.T) {
	f := newFakeVM(t, 1, true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A fake /proc with QEMU's (this process's) fds: 7 is /dev/vhost-net.
	root := t.TempDir()
	fdDir := filepath.Join(root, strconv.Itoa(os.Getpid()), "fd")
	if err := os.MkdirAll(fdDir, 0o755); err != nil {
		t.Fatal(err)
	}
	save := procRoot
	procRoot = root
	t.Cleanup(func() { procRoot = save })
	withVhostFD := func(on bool) {
		os.Remove(filepath.Join(fdDir, "7"))
		if on {
			if err := os.Symlink("/dev/vhost-net", filepath.Join(fdDir, "7")); err != nil {
				t.Fatal(err)
			}
		}
	}
	describe := func(info string) Target {
		t.Helper()
		c, err := qmp.Dial(ctx, f.sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ts, err := describeNICs(ctx, c, []string{"/machine/peripheral/net0/virtio-backend"}, info, os.Getpid())
		if err != nil || len(ts) != 1 {
			t.Fatalf("describe: %+v %v", ts, err)
		}
		return ts[0]
	}
	setVhost := func(on bool) {
		f.mu.Lock()
		f.vhost = on
		f.mu.Unlock()
	}
	tap := "hostnet0: index=0,type=tap,ifname=tap9,script=no,downscript=no\r\n"
	withVhostFD(true)
	if tg := describe(tap); tg.Backend != policy.BackendVhostNet || tg.NetdevType != "tap" {
		t.Errorf("vhost running: %+v", tg)
	}
	setVhost(false) // paused, or its link down
	if tg := describe(tap); tg.Backend != policy.BackendVhostNet {
		t.Errorf("vhost stopped, QEMU holds /dev/vhost-net: backend %q, want vhost-net", tg.Backend)
	}
	withVhostFD(false)
	if tg := describe(tap); tg.Backend != policy.BackendUserspace {
		t.Errorf("no vhost anywhere: backend %q, want userspace", tg.Backend)
	}
	vu := "hostnet0: index=0,type=vhost-user,vhost-user0\r\n"
	for _, on := range []bool{true, false} {
		setVhost(on)
		tg := describe(vu)
		if tg.Backend != BackendVhostUser || tg.NetdevType != "vhost-user" {
			t.Errorf("vhost-user (vhost running %v): %+v", on, tg)
		}
		tg.QMP = f.sock
		s := NewCollector(Options{}).Collect(ctx, []Target{tg})[0]
		if why, ok := s.Missing[SourceVhost]; ok || len(s.Workers) != 0 {
			t.Errorf("vhost-user NIC: vhost source %q, workers %v: a vhost-user backend has no vhost-net worker", why, s.Workers)
		}
		if strings.Contains(s.Missing[SourceLink], "vhost-net") {
			t.Errorf("link: %q", s.Missing[SourceLink])
		}
	}
}
