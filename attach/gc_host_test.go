package attach

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/test/qemutest"
)

// TestHostGCNICGoneFromRunningQEMU: a real QEMU 7.2 (q35, native PCIe
// hotplug, two root ports, paused) runs on while its NICs are taken away
// behind netctl's back. For one, device_del (the unplug completes without
// a guest) and netdev_del: gc deletes its macvtap and its record. For the
// other, only device_del: QEMU still has the netdev, so gc keeps the record
// and says detach finishes it; detach then does. The veth stays, and so
// does the lock file of the VM, which still runs.
func TestHostGCNICGoneFromRunningQEMU(t *testing.T) {
	testenv.Host(t)
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "nvgr0"}, PeerName: "nvgr1"}); err != nil {
		t.Fatal(err)
	}
	testenv.LinkUp(t, "nvgr0")
	sock, _ := qemutest.StartPaused(t, "gcrun", "-machine", "q35", "-global", "ICH9-LPC.acpi-pci-hotplug-with-bridge-support=off",
		"-device", "pcie-root-port,id=rp1,bus=pcie.0,chassis=1", "-device", "pcie-root-port,id=rp2,bus=pcie.0,chassis=2")
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	gone, err := Attach(ctx, Request{QMP: sock, ID: "gone", Macvtap: "nvgr0", StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	half, err := Attach(ctx, Request{QMP: sock, ID: "half", Macvtap: "nvgr0", StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	c := dialT(t, sock)
	for _, id := range []string{"gone", "half"} {
		if err := c.Run(ctx, "device_del", map[string]any{"id": id}, nil); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		ids, err := deviceIDs(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if !ids["gone"] && !ids["half"] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("QEMU still has devices %v", ids)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := c.Run(ctx, "netdev_del", map[string]any{"id": "netctl-gone"}, nil); err != nil {
		t.Fatal(err)
	}
	c.Close()

	res, err := GC(ctx, GCRequest{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range res.NICs {
		got = append(got, n.ID+" "+n.Verdict+" "+n.Action)
	}
	if want := []string{"gone nic-gone removed", "half netdev-left kept"}; !slices.Equal(got, want) {
		t.Errorf("gc: %v, want %v (%+v)", got, want, res.NICs)
	}
	if n := res.NICs[0]; !slices.Equal(n.Done, []string{"deleted macvtap " + gone.Macvtap.Name, "removed the record"}) {
		t.Errorf("gc of gone: %+v", n)
	}
	if n := res.NICs[1]; !strings.Contains(n.Why, "still has netdev netctl-half: run netctl detach --id half") {
		t.Errorf("gc of half: %+v", n)
	}
	if _, err := netlink.LinkByName(gone.Macvtap.Name); err == nil {
		t.Errorf("macvtap %s is still there", gone.Macvtap.Name)
	}
	if _, err := netlink.LinkByName(half.Macvtap.Name); err != nil {
		t.Errorf("macvtap %s of the kept record: %v", half.Macvtap.Name, err)
	}
	if r := records(t, dir); !slices.Equal(r, []string{"gcrun@half.json"}) {
		t.Errorf("records %v", r)
	}
	if err := Detach(ctx, DetachRequest{QMP: sock, ID: "half", StateDir: dir, Timeout: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if l := netctlLinks(t); len(l) != 0 {
		t.Errorf("links after detach: %v", l)
	}
	if got := qemuHolds(t, sock); got != "device rp1, device rp2" {
		t.Errorf("QEMU holds %q", got)
	}
	if _, err := netlink.LinkByName("nvgr0"); err != nil {
		t.Errorf("the veth: %v", err)
	}
	// No record is left, but QEMU runs (qemuproc finds it on the socket):
	// its lock file stays.
	res, err = GC(ctx, GCRequest{StateDir: dir})
	if err != nil || len(res.NICs) != 0 || len(res.Locks) != 1 || res.Locks[0].Action != GCKept ||
		res.Locks[0].Why != "a running QEMU serves QMP on "+sock {
		t.Errorf("gc at the end: %+v %v", res, err)
	}
}
