package attach

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netctl/netctl/state"
	"github.com/netctl/netctl/test/qemutest"

	"github.com/netctl/netctl/internal/fuzzalloc"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// records lists the state directory's record files.
func records(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(filepath.Join(dir, "nics"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var n []string
	for _, e := range es {
		n = append(n, e.Name())
	}
	return n
}

// nothingLeft fails the test when the fake QEMU, the fake host or the
// state directory hold anything.
// detachAgain lets the fake guest answer the next unplug (what a guest
// that finally releases the NIC does), detaches n1 again and checks that
// nothing is left.
func detachAgain(t *testing.T, q *fakeQEMU, h *fakeHost, dir, what string) {
	t.Helper()
	q.mu.Lock()
	q.unplug = "second"
	q.pending = map[string]bool{}
	q.mu.Unlock()
	if err := Detach(ctxT(t), DetachRequest{QMP: q.sock, ID: "n1", StateDir: dir, Host: h, Retry: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	nothingLeft(t, what, q, h, dir)
}

func nothingLeft(t *testing.T, what string, q *fakeQEMU, h *fakeHost, dir string) {
	t.Helper()
	if l := q.left(); l != "" {
		t.Errorf("%s: left in QEMU: %s", what, l)
	}
	if l := h.left(); l != "" {
		t.Errorf("%s: left on the host: %s", what, l)
	}
	if r := records(t, dir); len(r) != 0 {
		t.Errorf("%s: left in the state directory: %v", what, r)
	}
}

func TestAttachUserspaceAndDetach(t *testing.T) {
	q, h, dir := newFakeQEMU(t), newFakeHost(t, "probe-host-root.json"), t.TempDir()
	nic, err := Attach(ctxT(t), Request{QMP: q.sock, ID: "net1", MAC: "52:54:00:12:34:56", StateDir: dir, Host: h})
	if err != nil {
		t.Fatal(err)
	}
	if nic.Backend != "userspace" || nic.VM != "vm1" || nic.Netdev != "netctl-net1" || nic.Tap == nil || !nic.Tap.Created {
		t.Errorf("record %+v", nic)
	}
	if len(nic.Steps) != 3 || nic.Steps[0].Chosen || nic.Steps[1].Chosen || !nic.Steps[2].Chosen ||
		!strings.Contains(nic.Steps[1].Reason, "modprobe vhost_net") || nic.Steps[0].Backend != "vdpa" {
		t.Errorf("steps %+v", nic.Steps)
	}
	if got := q.left(); got != "device net1, netdev netctl-net1" {
		t.Errorf("QEMU holds %q", got)
	}
	q.mu.Lock()
	nfds := len(q.netdevs["netctl-net1"])
	q.mu.Unlock()
	if nfds != 1 || len(nic.FDNames) != 1 || nic.FDNames[0] != "netctl-net1-tap0" {
		t.Errorf("netdev fds %v, names %v", q.netdevs, nic.FDNames)
	}
	if l := h.left(); !strings.HasPrefix(l, "link nctl") || strings.Contains(l, "fd ") {
		t.Errorf("host holds %q, want only the tap link (its fds closed: QEMU has copies)", l)
	}
	ls, bad, err := list(ctxT(t), ListRequest{StateDir: dir, Host: h})
	if err != nil || len(bad) != 0 || len(ls) != 1 || ls[0].Present != "yes" || ls[0].ID != "net1" || ls[0].Link != "present" {
		t.Fatalf("list: %+v %v %v", ls, bad, err)
	}
	if err := Detach(ctxT(t), DetachRequest{QMP: q.sock, ID: "net1", StateDir: dir, Host: h}); err != nil {
		t.Fatal(err)
	}
	nothingLeft(t, "after detach", q, h, dir)
	if err := Detach(ctxT(t), DetachRequest{QMP: q.sock, ID: "net1", StateDir: dir, Host: h}); !errors.Is(err, ErrInvalid) {
		t.Errorf("second detach: %v", err)
	}
}

func TestAttachVhostNetMultiqueue(t *testing.T) {
	q, h, dir := newFakeQEMU(t), newFakeHost(t, "probe-6.12.json"), t.TempDir()
	nic, err := Attach(ctxT(t), Request{QMP: q.sock, ID: "net2", Queues: 4, Profile: "latency", StateDir: dir, Host: h})
	if err != nil {
		t.Fatal(err)
	}
	if nic.Backend != "vhost-net" || nic.Properties["mq"] != "on" || nic.Properties["vectors"] != "10" || len(nic.FDNames) != 8 {
		t.Errorf("record %+v", nic)
	}
	q.mu.Lock()
	n := len(q.netdevs["netctl-net2"])
	q.mu.Unlock()
	if n != 8 {
		t.Errorf("netdev holds %d fds, want 4 tap + 4 vhost", n)
	}
	if err := Detach(ctxT(t), DetachRequest{QMP: q.sock, ID: "net2", StateDir: dir, Host: h}); err != nil {
		t.Fatal(err)
	}
	nothingLeft(t, "after detach", q, h, dir)
}

func TestAttachMacvtap(t *testing.T) {
	q, h, dir := newFakeQEMU(t), newFakeHost(t, "probe-6.12.json"), t.TempDir()
	nic, err := Attach(ctxT(t), Request{QMP: q.sock, ID: "mv", Macvtap: "eth0:vepa", Queues: 2, StateDir: dir, Host: h})
	if err != nil {
		t.Fatal(err)
	}
	if nic.Macvtap == nil || nic.Macvtap.Lower != "eth0" || nic.Macvtap.Mode != "vepa" || !nic.Macvtap.Created || nic.Tap != nil {
		t.Errorf("record %+v", nic)
	}
	if err := Detach(ctxT(t), DetachRequest{QMP: q.sock, ID: "mv", StateDir: dir, Host: h}); err != nil {
		t.Fatal(err)
	}
	nothingLeft(t, "after detach", q, h, dir)
}

func TestAttachExistingTapIsKept(t *testing.T) {
	q, h, dir := newFakeQEMU(t), newFakeHost(t, "probe-host-root.json"), t.TempDir()
	h.links["tap9"] = 9
	nic, err := Attach(ctxT(t), Request{QMP: q.sock, ID: "t9", Tap: "tap9", StateDir: dir, Host: h})
	if err != nil {
		t.Fatal(err)
	}
	if nic.Tap.Created {
		t.Error("an existing tap recorded as created")
	}
	if err := Detach(ctxT(t), DetachRequest{QMP: q.sock, ID: "t9", StateDir: dir, Host: h}); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.links["tap9"]; !ok {
		t.Error("detach deleted a tap netctl did not create")
	}
	nothingLeft(t, "after detach", q, h, dir)
}

func TestAttachVDPAFromMgmtdev(t *testing.T) {
	q, h, dir := newFakeQEMU(t), newFakeHost(t, "probe-6.12-vdpa.json"), t.TempDir()
	nic, err := Attach(ctxT(t), Request{QMP: q.sock, ID: "v1", Mgmtdev: "vduse", StateDir: dir, Host: h})
	if err != nil {
		t.Fatal(err)
	}
	if nic.Backend != "vdpa" || nic.VDPA == nil || !nic.VDPA.Created || nic.FDNames[0] != "netctl-v1-vdpa0" {
		t.Fatalf("record %+v", nic)
	}
	if err := Detach(ctxT(t), DetachRequest{QMP: q.sock, ID: "v1", StateDir: dir, Host: h}); err != nil {
		t.Fatal(err)
	}
	nothingLeft(t, "after detach", q, h, dir)
}

// TestAttachVDUSENeedsSharedRAM: a vdpa device whose parent maps virtual
// addresses (VDUSE) moves nothing unless the guest's RAM is shared memory
// (measured in the 6.12 VM: DRIVER_OK, vhost started, no buffer used), so
// attach refuses a VM with private RAM, says how to start QEMU, and
// leaves nothing (the device it created is deleted); with shared RAM it
// attaches.
func TestAttachVDUSENeedsSharedRAM(t *testing.T) {
	q, h, dir := newFakeQEMU(t), newFakeHost(t, "probe-6.12-vdpa.json"), t.TempDir()
	h.vdpaVA = true
	_, err := Attach(ctxT(t), Request{QMP: q.sock, ID: "v1", Mgmtdev: "vduse", StateDir: dir, Host: h})
	if !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "pc.ram (128 MiB)") ||
		!strings.Contains(err.Error(), "memory-backend-memfd,id=mem,size=SIZE,share=on") {
		t.Fatalf("attach of a VDUSE device to a VM with private RAM: %v", err)
	}
	nothingLeft(t, "after the refusal", q, h, dir)
	q.mu.Lock()
	q.shareRAM = true
	q.mu.Unlock()
	if _, err := Attach(ctxT(t), Request{QMP: q.sock, ID: "v1", Mgmtdev: "vduse", StateDir: dir, Host: h}); err != nil {
		t.Fatalf("with shared RAM: %v", err)
	}
}

func TestAttachBadInputChangesNothing(t *testing.T) {
	for _, r := range []Request{
		{ID: "n1", MAC: "52:54:00:12:34"},
		{ID: "n1", MAC: "53:54:00:12:34:56"},
		{ID: "n1", Queues: 300},
		{ID: "n1", Queues: -1},
		{ID: "n1", Backend: "dpdk"},
		{ID: "1n"},
		{ID: "n 1"},
		{ID: "n1", Tap: "tap0", Macvtap: "eth0"},
		{ID: "n1", Macvtap: "eth0:sideways"},
		{ID: "n1", MTU: 20},
		{ID: "n1", Profile: "fast"},
		{ID: "n1", Backend: "vhost-net", VDPA: "vdpa0"},
	} {
		q, h, dir := newFakeQEMU(t), newFakeHost(t, "probe-host-root.json"), t.TempDir()
		r.QMP, r.StateDir, r.Host = q.sock, dir, h
		_, err := Attach(ctxT(t), r)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", r, err)
		}
		q.mu.Lock()
		if len(q.log) != 0 {
			t.Errorf("%+v: QEMU was asked %v", r, q.log)
		}
		q.mu.Unlock()
		nothingLeft(t, "bad input", q, h, dir)
	}
}

func TestAttachIDInUse(t *testing.T) {
	q, h, dir := newFakeQEMU(t), newFakeHost(t, "probe-host-root.json"), t.TempDir()
	q.mu.Lock()
	q.devices["net0"] = "other"
	q.mu.Unlock()
	_, err := Attach(ctxT(t), Request{QMP: q.sock, ID: "net0", StateDir: dir, Host: h})
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "already has a device with id net0") {
		t.Errorf("attach over an id in use: %v", err)
	}
	q.mu.Lock()
	delete(q.devices, "net0")
	q.mu.Unlock()
	nothingLeft(t, "id in use", q, h, dir)
	if _, err := Attach(ctxT(t), Request{QMP: q.sock, ID: "net0", StateDir: dir, Host: h}); err != nil {
		t.Fatal(err)
	}
	if _, err := Attach(ctxT(t), Request{QMP: q.sock, ID: "net0", StateDir: dir, Host: h}); !errors.Is(err, ErrConflict) {
		t.Errorf("second attach of net0: %v", err)
	}
}

func TestAttachBackendNotHere(t *testing.T) {
	q, h, dir := newFakeQEMU(t), newFakeHost(t, "probe-host-root.json"), t.TempDir()
	_, err := Attach(ctxT(t), Request{QMP: q.sock, ID: "n1", Backend: "vhost-net", StateDir: dir, Host: h})
	if !errors.Is(err, ErrNotAvailable) || !strings.Contains(err.Error(), "modprobe vhost_net") {
		t.Errorf("--backend vhost-net without it: %v", err)
	}
	nothingLeft(t, "backend not here", q, h, dir)
}

func TestAttachNotQEMU(t *testing.T) {
	sock := qemutest.NotQMP(t, "SSH-2.0-OpenSSH_9.2\r\n", 0)
	h, dir := newFakeHost(t, "probe-host-root.json"), t.TempDir()
	if _, err := Attach(ctxT(t), Request{QMP: sock, ID: "n1", StateDir: dir, Host: h}); err == nil || !strings.Contains(err.Error(), "connect to QEMU") {
		t.Errorf("attach to a socket that is not QEMU: %v", err)
	}
	if l := h.left(); l != "" {
		t.Errorf("host: %s", l)
	}
}

// TestAttachFaults fails each QMP command of a clean attach in turn (an
// error answer; QEMU closing the connection instead of doing it; QEMU
// doing it and closing the connection before answering), and each host
// step, on three paths; afterwards nothing is left anywhere.
func TestAttachFaults(t *testing.T) {
	for _, c := range []struct {
		name, probe string
		req         Request
		hostSteps   []string
	}{
		{"userspace", "probe-host-root.json", Request{ID: "n1"}, []string{"Probe", "OpenTap"}},
		{"vhost-net-2q", "probe-6.12.json", Request{ID: "n1", Queues: 2}, []string{"Probe", "OpenTap", "OpenVhostNet", "OpenVhostNet#2"}},
		{"macvtap", "probe-6.12.json", Request{ID: "n1", Macvtap: "eth0"}, []string{"CreateMacvtap", "OpenVhostNet"}},
		{"vdpa-mgmtdev", "probe-6.12-vdpa.json", Request{ID: "n1", Mgmtdev: "vduse"}, []string{"CreateVDPA", "Probe", "OpenVDPA"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			// A clean run gives the commands to break.
			q, h, dir := newFakeQEMU(t), newFakeHost(t, c.probe), t.TempDir()
			r := c.req
			r.QMP, r.StateDir, r.Host = q.sock, dir, h
			if _, err := Attach(ctxT(t), r); err != nil {
				t.Fatal(err)
			}
			q.mu.Lock()
			cmds := q.log
			q.mu.Unlock()
			seen := map[string]int{}
			for _, cmd := range cmds {
				seen[cmd]++
				if cmd == "qmp_capabilities" {
					continue
				}
				for _, mode := range []string{"error", "hangup", "after"} {
					q, h, dir := newFakeQEMU(t), newFakeHost(t, c.probe), t.TempDir()
					r := c.req
					r.QMP, r.StateDir, r.Host = q.sock, dir, h
					q.mu.Lock()
					switch mode {
					case "error":
						q.fail[cmd] = seen[cmd]
					case "hangup":
						q.hangup[cmd] = seen[cmd]
					default: // QEMU did it, and the answer was lost
						q.after[cmd] = seen[cmd]
					}
					q.mu.Unlock()
					what := mode + " at " + cmd + "#" + string(rune('0'+seen[cmd]))
					_, err := Attach(ctxT(t), r)
					if err == nil {
						t.Errorf("%s: attach succeeded", what)
						continue
					}
					if strings.Contains(err.Error(), "rolling back failed") {
						t.Errorf("%s: %v", what, err)
					}
					nothingLeft(t, what, q, h, dir)
				}
			}
			t.Logf("%d QMP commands broken in turn, twice each: %v", len(cmds)-1, cmds)
			for _, s := range c.hostSteps {
				m, n, _ := strings.Cut(s, "#")
				q, h, dir := newFakeQEMU(t), newFakeHost(t, c.probe), t.TempDir()
				r := c.req
				r.QMP, r.StateDir, r.Host = q.sock, dir, h
				h.fail[m] = 1
				if n == "2" {
					h.fail[m] = 2
				}
				if _, err := Attach(ctxT(t), r); err == nil || !strings.Contains(err.Error(), "injected failure of "+m) {
					t.Errorf("host step %s failing: %v", s, err)
				}
				nothingLeft(t, "host step "+s, q, h, dir)
			}
		})
	}
}

// TestDetachGuestBusyIsPending: on q35 with native PCIe hotplug, a repeated
// device_del while the guest's pciehp waits its 5 s is answered "guest is
// busy (power indicator blinking)" (found against a real 6.12 guest); the
// unplug is under way, and detach waits for it instead of failing.
func TestDetachGuestBusyIsPending(t *testing.T) {
	q, h, dir := newFakeQEMU(t), newFakeHost(t, "probe-host-root.json"), t.TempDir()
	if _, err := Attach(ctxT(t), Request{QMP: q.sock, ID: "n1", StateDir: dir, Host: h}); err != nil {
		t.Fatal(err)
	}
	q.mu.Lock()
	q.unplug = "blinking"
	q.mu.Unlock()
	if err := Detach(ctxT(t), DetachRequest{QMP: q.sock, ID: "n1", StateDir: dir, Host: h, Timeout: 5 * time.Second, Retry: 100 * time.Millisecond}); err != nil {
		t.Fatalf("detach while the guest's unplug is under way: %v", err)
	}
	if ls, _, _ := list(ctxT(t), ListRequest{StateDir: dir}); len(ls) != 0 {
		t.Errorf("records left: %+v", ls)
	}
}

// TestDetachFromAnotherNetns: a NIC whose tap netctl created from another
// network namespace is refused by a detach run here (a link with the same
// name and ifindex here is another link), and nothing changes: QEMU keeps
// the NIC, the record stays as it was.
func TestDetachFromAnotherNetns(t *testing.T) {
	q, h, dir := newFakeQEMU(t), newFakeHost(t, "probe-host-root.json"), t.TempDir()
	nic, err := Attach(ctxT(t), Request{QMP: q.sock, ID: "n1", StateDir: dir, Host: h})
	if err != nil {
		t.Fatal(err)
	}
	store, err := state.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	nic.NetNS++ // as if attached from elsewhere
	if err := store.Save(nic); err != nil {
		t.Fatal(err)
	}
	err = Detach(ctxT(t), DetachRequest{QMP: q.sock, ID: "n1", StateDir: dir, Host: h, Timeout: time.Second})
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "ip netns exec NAME netctl detach") {
		t.Fatalf("detach from another namespace: %v", err)
	}
	q.mu.Lock()
	_, still := q.devices["n1"]
	q.mu.Unlock()
	ls, _, _ := list(ctxT(t), ListRequest{StateDir: dir})
	if !still || len(ls) != 1 || ls[0].Status != state.StatusAttached {
		t.Errorf("after the refusal: device in QEMU %v, records %+v", still, ls)
	}
}

func TestDetachTimeoutThenAgain(t *testing.T) {
	q, h, dir := newFakeQEMU(t), newFakeHost(t, "probe-host-root.json"), t.TempDir()
	if _, err := Attach(ctxT(t), Request{QMP: q.sock, ID: "n1", StateDir: dir, Host: h}); err != nil {
		t.Fatal(err)
	}
	q.mu.Lock()
	q.unplug = "never"
	q.mu.Unlock()
	start := time.Now()
	err := Detach(ctxT(t), DetachRequest{QMP: q.sock, ID: "n1", StateDir: dir, Host: h, Timeout: time.Second, Retry: 100 * time.Millisecond})
	if !errors.Is(err, ErrTimeout) || time.Since(start) > 5*time.Second {
		t.Fatalf("detach from a guest that never answers: %v after %v", err, time.Since(start))
	}
	q.mu.Lock()
	if q.calls["device_del"] < 3 {
		t.Errorf("device_del sent %d times in 1 s with a 100 ms retry", q.calls["device_del"])
	}
	q.mu.Unlock()
	ls, _, _ := list(ctxT(t), ListRequest{StateDir: dir, VMName: "vm1"})
	if len(ls) != 1 || ls[0].Status != state.StatusDetachTimeout || ls[0].Present != "yes" {
		t.Errorf("list after the timeout: %+v", ls)
	}
	if q.left() != "device n1, netdev netctl-n1" {
		t.Errorf("QEMU after a timed-out detach: %s (the netdev must stay until the device is gone)", q.left())
	}
	detachAgain(t, q, h, dir, "after the second detach")
}

func TestDetachFaults(t *testing.T) {
	for _, cmd := range []string{"query-name", "device_del", "netdev_del"} {
		for _, mode := range []string{"error", "hangup"} {
			q, h, dir := newFakeQEMU(t), newFakeHost(t, "probe-host-root.json"), t.TempDir()
			if _, err := Attach(ctxT(t), Request{QMP: q.sock, ID: "n1", StateDir: dir, Host: h}); err != nil {
				t.Fatal(err)
			}
			q.mu.Lock()
			q.calls = map[string]int{}
			if mode == "error" {
				q.fail[cmd] = 1
			} else {
				q.hangup[cmd] = 1
			}
			q.mu.Unlock()
			if err := Detach(ctxT(t), DetachRequest{QMP: q.sock, ID: "n1", StateDir: dir, Host: h}); err == nil {
				t.Errorf("%s at %s: detach succeeded", mode, cmd)
			}
			if len(records(t, dir)) != 1 {
				t.Errorf("%s at %s: the record is gone though detach failed", mode, cmd)
			}
			if err := Detach(ctxT(t), DetachRequest{QMP: q.sock, ID: "n1", StateDir: dir, Host: h}); err != nil {
				t.Errorf("%s at %s: detach again: %v", mode, cmd, err)
			}
			nothingLeft(t, mode+" at "+cmd+", then detach again", q, h, dir)
		}
	}
}

func TestParseNetdevIDs(t *testing.T) {
	b, err := os.ReadFile("../policy/diagnose/testdata/info-network-qemu-7.2.txt")
	if err != nil {
		t.Fatal(err)
	}
	ids, err := parseNetdevIDs(string(b))
	if err != nil || len(ids) == 0 {
		t.Fatalf("%v %v", ids, err)
	}
	t.Logf("ids %v", ids)
}

func FuzzParseNetdevIDs(f *testing.F) {
	b, err := os.ReadFile("../policy/diagnose/testdata/info-network-qemu-7.2.txt")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(b))
	f.Add("hostnet0: index=0,type=tap,fds=netctl-n1-tap0\r\nnet0: index=0,type=nic,model=virtio-net-pci\r\n \\ hostnet0: index=0,type=tap\r\n")
	f.Fuzz(func(t *testing.T, s string) {
		var ids map[string]bool
		var err error
		fuzzalloc.Check(t, len(s), func() { ids, err = parseNetdevIDs(s) })
		if err == nil && len(ids) > maxIDs {
			t.Fatalf("%d ids", len(ids))
		}
	})
}

// TestDetachAfterQEMUExited: the record's QEMU is gone (here: its start
// time no longer matches, as for a reused pid) and its socket is dead:
// detach, named by the socket alone, finds the record, deletes what
// netctl created on the host and removes the record.
func TestDetachAfterQEMUExited(t *testing.T) {
	q, h, dir := newFakeQEMU(t), newFakeHost(t, "probe-host-root.json"), t.TempDir()
	nic, err := Attach(ctxT(t), Request{QMP: q.sock, ID: "n1", Macvtap: "eth0", StateDir: dir, Host: h})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := state.Open(dir)
	nic.QEMUStart++
	if err := st.Save(nic); err != nil {
		t.Fatal(err)
	}
	q.ln.Close()
	os.Remove(q.sock)
	ls, _, _ := list(ctxT(t), ListRequest{StateDir: dir})
	if len(ls) != 1 || ls[0].Present != "gone" {
		t.Errorf("list: %+v", ls)
	}
	if err := Detach(ctxT(t), DetachRequest{QMP: q.sock, ID: "n1", StateDir: dir, Host: h}); err != nil {
		t.Fatal(err)
	}
	if l := h.left(); l != "" {
		t.Errorf("host: %s", l)
	}
	if r := records(t, dir); len(r) != 0 {
		t.Errorf("records: %v", r)
	}
}

// TestAttachDetachParallel: 8 workers attach and detach 100 NICs across 4
// VMs at once (same-VM calls serialise on the VM's lock and QEMU's one
// connection; different VMs run side by side); every call succeeds and
// nothing is left.
func TestAttachDetachParallel(t *testing.T) {
	h, dir := newFakeHost(t, "probe-6.12.json"), t.TempDir()
	vms := newFakeVMs(t, 4)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100/8+1; i++ {
				q := vms[(w+i)%4]
				id := fmt.Sprintf("w%dn%d", w, i)
				if _, err := Attach(context.Background(), Request{QMP: q.sock, ID: id, Queues: 1 + i%2, StateDir: dir, Host: h}); err != nil {
					t.Errorf("attach %s: %v", id, err)
					continue
				}
				if err := Detach(context.Background(), DetachRequest{QMP: q.sock, ID: id, StateDir: dir, Host: h}); err != nil {
					t.Errorf("detach %s: %v", id, err)
				}
			}
		}()
	}
	wg.Wait()
	for _, q := range vms {
		nothingLeft(t, q.sock, q, h, dir)
	}
}

// TestAttachMonitorHeld: a monitor that accepts but never greets (another
// client holds it) is refused after monitorWait with a message that says
// so, not after the whole timeout.
func TestAttachMonitorHeld(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "held.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var mu sync.Mutex
	var conns []net.Conn
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held: no greeting
			mu.Unlock()
		}
	}()
	old := monitorWait
	monitorWait = 300 * time.Millisecond
	defer func() { monitorWait = old }()
	h, dir := newFakeHost(t, "probe-host-root.json"), t.TempDir()
	start := time.Now()
	_, err = Attach(ctxT(t), Request{QMP: sock, ID: "n1", StateDir: dir, Host: h})
	if err == nil || !strings.Contains(err.Error(), "another client holds this QMP monitor") || time.Since(start) > 5*time.Second {
		t.Errorf("attach to a held monitor: %v after %v", err, time.Since(start))
	}
	if l := h.left(); l != "" {
		t.Errorf("host: %s", l)
	}
}

// TestDetachDeviceAlreadyGone: the device was removed behind netctl's
// back (device_del answers DeviceNotFound): detach still deletes the
// netdev, the tap and the record.
func TestDetachDeviceAlreadyGone(t *testing.T) {
	q, h, dir := newFakeQEMU(t), newFakeHost(t, "probe-host-root.json"), t.TempDir()
	if _, err := Attach(ctxT(t), Request{QMP: q.sock, ID: "n1", StateDir: dir, Host: h}); err != nil {
		t.Fatal(err)
	}
	q.mu.Lock()
	delete(q.devices, "n1")
	q.mu.Unlock()
	if err := Detach(ctxT(t), DetachRequest{QMP: q.sock, ID: "n1", StateDir: dir, Host: h}); err != nil {
		t.Fatal(err)
	}
	nothingLeft(t, "after detach", q, h, dir)
}
