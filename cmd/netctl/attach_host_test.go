package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/state"
	"github.com/netctl/netctl/test/qemutest"
)

// TestHostAttachCLI runs netctl attach, list and detach against a real,
// paused QEMU 7.2 (-machine pc, no guest) in the test's namespace. This
// host has no vhost-net: attach falls back to QEMU's userspace path and
// says why; --backend vhost-net fails with that reason, exit 1, and
// changes nothing; an id in use is refused; detach with no guest to answer
// times out with exit 1 and list marks the NIC detach-timeout.
func TestHostAttachCLI(t *testing.T) {
	testenv.Host(t)
	bin := netctlBinary(t)
	dir := t.TempDir()
	t.Setenv("NETCTL_RUN_DIR", filepath.Join(dir, "run"))
	// A name of its own: --vm finds QEMUs machine-wide.
	name := fmt.Sprintf("clivm%d", os.Getpid())
	sock, _ := qemutest.StartPaused(t, name)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	r := execNetctl(t, bin, "attach", "--qmp", sock, "--id", "net1", "--queues", "2", "--mac", "52:54:00:00:00:01")
	t.Logf("netctl attach:\n%s%s", r.stdout, r.stderr)
	for _, want := range []string{"attached net1 to " + name + " (QEMU 7.2", "QEMU userspace virtio-net, 2 queue pair(s)",
		"vhost-net: /dev/vhost-net: no such file or directory", "modprobe vhost_net", "-> userspace", "features:", "properties: ", "mq=on", "vectors=6"} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("attach: exit %d, no %q in its output", r.code, want)
		}
	}
	links := func() int {
		ls, _ := netlink.LinkList()
		n := 0
		for _, l := range ls {
			if strings.HasPrefix(l.Attrs().Name, "nctl") {
				n++
			}
		}
		return n
	}
	if links() != 1 {
		t.Errorf("%d nctl links after one attach", links())
	}

	r = execNetctl(t, bin, "attach", "--qmp", sock, "--id", "net2", "--backend", "vhost-net")
	if r.code != 1 || !strings.Contains(r.stderr, "backend vhost-net is not available here") || !strings.Contains(r.stderr, "modprobe vhost_net") {
		t.Errorf("attach --backend vhost-net: %+v", r)
	}
	r = execNetctl(t, bin, "attach", "--qmp", sock, "--id", "net1")
	if r.code != 1 || !strings.Contains(r.stderr, "already attached a NIC net1") {
		t.Errorf("attach over net1 again: %+v", r)
	}
	if links() != 1 {
		t.Errorf("%d nctl links after refused attaches", links())
	}

	// --vm NAME finds the same QEMU by its -name (qemuproc) and its one
	// QMP socket.
	r = execNetctl(t, bin, "attach", "--vm", name, "--id", "net3", "--mac", "52:54:00:00:00:03")
	if r.code != 0 || !strings.Contains(r.stdout, "attached net3 to "+name) {
		t.Errorf("attach --vm %s: %+v", name, r)
	}
	r = execNetctl(t, bin, "list", "--vm", name, "--json")
	var ls []struct {
		state.NIC
		Present string `json:"present"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &ls); err != nil || r.code != 0 || len(ls) != 2 || ls[0].Present != "yes" || ls[0].Backend != "userspace" || ls[1].Present != "yes" {
		t.Errorf("list --json: %v %+v", err, r)
	}
	// While netctl's test holds the VM's only monitor, --vm says so
	// (busy, by this process) instead of hanging.
	held, err := qmp.Dial(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	r = execNetctl(t, bin, "attach", "--vm", name, "--id", "net4")
	if r.code != 1 || !strings.Contains(r.stderr, "in use by") {
		t.Errorf("attach --vm with the monitor held: %+v", r)
	}
	held.Close()

	r = execNetctl(t, bin, "detach", "--qmp", sock, "--id", "net1", "--timeout", "1s")
	if r.code != 1 || !strings.Contains(r.stderr, "did not release NIC net1 within 1s") {
		t.Errorf("detach with no guest: %+v", r)
	}
	r = execNetctl(t, bin, "list")
	if !strings.Contains(r.stdout, "detach-timeout") {
		t.Errorf("list after the timeout: %+v", r)
	}
}
