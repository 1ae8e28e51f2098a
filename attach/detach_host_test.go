package attach

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/state"
	"github.com/netctl/netctl/test/qemutest"
)

// TestHostDetachPausedPC: on a paused -machine pc with no guest, device_del
// goes through ACPI PCI hotplug, which needs the guest's ACPI code:
// nothing answers, so detach ends in ErrTimeout after its deadline with
// the record marked detach-timeout, and the netdev stays (it must outlive
// the device). Then QEMU's system_reset completes the pending unplug (a
// reset finishes every pending removal) and detach, run again, finishes.
func TestHostDetachPausedPC(t *testing.T) {
	testenv.Host(t)
	sock, _ := qemutest.StartPaused(t, "pcvm")
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := Attach(ctx, Request{QMP: sock, ID: "net1", StateDir: dir}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := Detach(ctx, DetachRequest{QMP: sock, ID: "net1", StateDir: dir, Timeout: 2 * time.Second, Retry: 500 * time.Millisecond})
	t.Logf("detach on a paused pc: %v after %v", err, time.Since(start).Round(time.Millisecond))
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("detach on a paused pc without a guest: %v, want ErrTimeout", err)
	}
	ls, _, _ := list(ctx, ListRequest{StateDir: dir})
	if len(ls) != 1 || ls[0].Status != state.StatusDetachTimeout || ls[0].Present != "yes" {
		t.Errorf("list after the timeout: %+v", ls)
	}
	if got := qemuHolds(t, sock); !strings.Contains(got, "client netctl-net1") || !strings.Contains(got, "device net1") {
		t.Errorf("QEMU after the timeout holds %q: the device and its netdev must both stay", got)
	}
	c := dialT(t, sock)
	if err := c.Run(ctx, "system_reset", nil, nil); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := Detach(ctx, DetachRequest{QMP: sock, ID: "net1", StateDir: dir, Timeout: 5 * time.Second}); err != nil {
		t.Fatalf("detach after system_reset: %v", err)
	}
	if got := qemuHolds(t, sock); got != "" {
		t.Errorf("QEMU after detach holds %q", got)
	}
	if l := netctlLinks(t); len(l) != 0 {
		t.Errorf("links after detach: %v", l)
	}
	if r := records(t, dir); len(r) != 0 {
		t.Errorf("records after detach: %v", r)
	}
}

// TestHostDetachQ35RootPort: on q35 with native PCIe hotplug a NIC in a
// pcie-root-port whose slot the (absent) guest never powered unplugs at
// once (QEMU's fast unplug when slot power is off): detach completes with
// DEVICE_DELETED in tens of milliseconds. Attach puts the NIC into the
// free root port itself, and with none left it refuses the next NIC
// before changing anything (q35's pcie.0 takes no hotplug: QEMU 7.2 says
// "Bus 'pcie.0' does not support hotplugging"). Seen on QEMU 7.2: with q35's
// default (ACPI PCI hotplug also for root ports, since 6.1) the same
// detach waits for a guest like -machine pc and times out, so the test
// turns native hotplug on with
// -global ICH9-LPC.acpi-pci-hotplug-with-bridge-support=off.
func TestHostDetachQ35RootPort(t *testing.T) {
	testenv.Host(t)
	sock, _ := qemutest.StartPaused(t, "q35vm", "-machine", "q35", "-global", "ICH9-LPC.acpi-pci-hotplug-with-bridge-support=off", "-device", "pcie-root-port,id=rp1,bus=pcie.0,chassis=1")
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fds := testenv.OpenFDs(t)
	nic, err := Attach(ctx, Request{QMP: sock, ID: "net1", StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if nic.Properties["bus"] != "rp1" {
		t.Errorf("bus %q: want the free root port rp1", nic.Properties["bus"])
	}
	// The one root port is taken now: a second NIC has nowhere to go,
	// and attach says so before changing anything.
	before := qemuHolds(t, sock)
	if _, err := Attach(ctx, Request{QMP: sock, ID: "net2", StateDir: dir}); !errors.Is(err, ErrNotAvailable) || !strings.Contains(err.Error(), "-device pcie-root-port") {
		t.Errorf("attach with no free root port: %v", err)
	}
	if got := qemuHolds(t, sock); got != before {
		t.Errorf("QEMU after a refused attach: %q, before %q", got, before)
	}
	start := time.Now()
	err = Detach(ctx, DetachRequest{QMP: sock, ID: "net1", StateDir: dir, Timeout: 10 * time.Second})
	t.Logf("detach on a paused q35, root port: %v after %v", err, time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if got := qemuHolds(t, sock); got != "device rp1" {
		t.Errorf("QEMU after detach holds %q", got)
	}
	if l := netctlLinks(t); len(l) != 0 {
		t.Errorf("links after detach: %v (the tap goes with QEMU's last fd)", l)
	}
	if n := testenv.OpenFDs(t); n != fds {
		t.Errorf("%d fds open, %d before", n, fds)
	}
	if r := records(t, dir); len(r) != 0 {
		t.Errorf("records after detach: %v", r)
	}
}
