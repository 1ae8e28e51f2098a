package l2

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/attach"
	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/state"
	"github.com/netctl/netctl/test/vduse"
	"github.com/netctl/netctl/vdpa"
)

// qemuHolds says whether QEMU (pid) holds an fd whose link ends in suffix
// (QEMU runs chrooted in /host, but its fds are L1's devices).
func qemuHolds(pid int, suffix string) bool {
	fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
	for _, fd := range fds {
		if l, _ := os.Readlink(fd); strings.HasSuffix(l, suffix) {
			return true
		}
	}
	return false
}

// TestVMAttachVhostNet: attach.Attach (what netctl attach runs) with
// --backend vhost-net on an existing tap, into a paused firmware-only
// nested QEMU: the raw checks of TestVMFirmwareVhostNet hold (DHCP both
// ways through vhost-net, vhost-started, the kernel's worker, QEMU holds
// /dev/vhost-net); Detach at the firmware stage ends in ErrTimeout with
// the record marked detach-timeout; after system_reset completes the
// unplug, Detach cleans up and leaves no record.
func TestVMAttachVhostNet(t *testing.T) {
	k := testenv.Require(t, "vhost_net", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
	defer cancel()
	mac := net.HardwareAddr{0x52, 0x54, 0, 0, 0x0f, 0x30}
	tap, err := macvtap.CreateTap(macvtap.TapConfig{Name: "fwat0", VnetHdr: true, Persistent: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tap.Delete()
	tap.Close() // attach opens the tap itself
	testenv.LinkUp(t, "fwat0")
	srv, err := ServeDHCP("fwat0", mac)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	stateDir := t.TempDir()

	g, c := startFirmware(ctx, t, Firmware{Name: "attach", SecondMonitor: true})
	nic, err := attach.Attach(ctx, attach.Request{QMP: g.QMP2, ID: "net1", Backend: "vhost-net", Tap: "fwat0",
		MAC: mac.String(), StateDir: stateDir})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("attach: backend %s, netdev %s, fds %v, properties %v", nic.Backend, nic.Netdev, nic.FDNames, nic.Properties)
	if nic.Backend != "vhost-net" || nic.Netdev != attach.NetdevID("net1") {
		t.Errorf("record: backend %q netdev %q", nic.Backend, nic.Netdev)
	}
	if !qemuHolds(g.PID, "/dev/vhost-net") {
		t.Errorf("after attach QEMU holds no /dev/vhost-net fd")
	}
	if _, ok := vhostThread(g.PID); !ok {
		t.Errorf("after attach: no vhost-%d worker", g.PID)
	}
	t0 := time.Now()
	if _, err := c.Execute(ctx, "cont", nil); err != nil {
		t.Fatal(err)
	}
	checkDHCP(ctx, t, srv, 75*time.Second)
	t.Logf("kernel %s: DHCP both ways %.1f s after cont", k.Name, time.Since(t0).Seconds())
	st, err := waitStatus(ctx, t, c, "net1", 10*time.Second, func(s *VirtioStatus) bool { return s.VhostStarted && s.DriverOK() })
	if err != nil {
		t.Fatal(err)
	}
	if st.Vhost == nil {
		t.Errorf("vhost-started, yet no vhost-dev")
	}

	// Firmware stage: no OS answers device_del.
	err = attach.Detach(ctx, attach.DetachRequest{QMP: g.QMP2, ID: "net1", StateDir: stateDir, Timeout: 4 * time.Second, Retry: 2 * time.Second})
	t.Logf("detach at the firmware stage: %v", err)
	if !errors.Is(err, attach.ErrTimeout) {
		t.Errorf("detach with only firmware running: %v, want ErrTimeout", err)
	}
	ls, err := attach.List(ctx, attach.ListRequest{StateDir: stateDir})
	if err != nil || len(ls) != 1 || ls[0].Status != state.StatusDetachTimeout {
		t.Errorf("list after the timeout: %v %+v, want one NIC in detach-timeout", err, ls)
	}
	if _, err := c.Execute(ctx, "system_reset", nil); err != nil {
		t.Fatal(err)
	}
	if err := attach.Detach(ctx, attach.DetachRequest{QMP: g.QMP2, ID: "net1", StateDir: stateDir, Timeout: 10 * time.Second}); err != nil {
		t.Fatalf("detach after system_reset: %v", err)
	}
	if info := hmp(ctx, t, c, "info network"); strings.Contains(info, nic.Netdev) {
		t.Errorf("after detach QEMU still has %s:\n%s", nic.Netdev, info)
	}
	if qemuHolds(g.PID, "/dev/vhost-net") {
		t.Errorf("after detach QEMU still holds /dev/vhost-net")
	}
	if ls, err := attach.List(ctx, attach.ListRequest{StateDir: stateDir}); err != nil || len(ls) != 0 {
		t.Errorf("list after detach: %v %+v, want none", err, ls)
	}
}

// TestVMAttachVDPA: attach.Attach --backend vdpa with an existing VDUSE
// vdpa device into a paused nested QEMU with shared guest RAM: iPXE
// drives it to DRIVER_OK and the VDUSE device uses its TX frames; detach
// after system_reset leaves no record and QEMU no vhost-vdpa fd.
func TestVMAttachVDPA(t *testing.T) {
	k := testenv.Require(t, "vhost_vdpa", func(m *testenv.Missing) {
		// attach --backend vdpa refuses, names why, and changes nothing in QEMU.
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		g, c := startFirmware(ctx, m.T, Firmware{Name: "attachnov", SecondMonitor: true})
		_, err := attach.Attach(ctx, attach.Request{QMP: g.QMP2, ID: "net1", Backend: "vdpa", VDPA: "fwatv0",
			StateDir: m.TempDir()})
		m.Logf("attach --backend vdpa on %s: %v", m.Kernel().Name, err)
		m.Err(err, attach.ErrNotAvailable, "vdpa")
		info := hmp(ctx, m.T, c, "info network")
		m.Check(!strings.Contains(info, "netctl-net1"), "after the refused attach QEMU has a netdev: %s", info)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
	defer cancel()
	cl, err := vdpa.Dial(ctx)
	if err != nil {
		t.Fatalf("kernel %s: %v", k.Name, err)
	}
	defer cl.Close()
	mac := net.HardwareAddr{0x52, 0x54, 0, 0, 0x0f, 0x31}
	dev, err := vduse.Create(vduse.Config{Name: "fwatv0", MAC: mac})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if err := cl.AddDevice(ctx, vdpa.AddOptions{Name: "fwatv0", MgmtDev: "vduse"}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := cl.DeleteDevice(context.Background(), "fwatv0"); err != nil {
			t.Errorf("vdpa dev del: %v", err)
		}
	}()
	stateDir := t.TempDir()
	g, c := startFirmware(ctx, t, Firmware{Name: "attachv", SharedMemory: true, SecondMonitor: true})
	defer g.Close() // before vdpa dev del
	nic, err := attach.Attach(ctx, attach.Request{QMP: g.QMP2, ID: "net1", Backend: "vdpa", VDPA: "fwatv0",
		MAC: mac.String(), StateDir: stateDir})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("attach: backend %s, netdev %s, fds %v, properties %v", nic.Backend, nic.Netdev, nic.FDNames, nic.Properties)
	if !qemuHolds(g.PID, "/dev/vhost-vdpa-0") && !qemuHolds(g.PID, "vhost-vdpa-1") {
		t.Errorf("after attach QEMU holds no /dev/vhost-vdpa-N fd")
	}
	t0 := time.Now()
	if _, err := c.Execute(ctx, "cont", nil); err != nil {
		t.Fatal(err)
	}
	for time.Since(t0) < 40*time.Second && (dev.Status()&4 == 0 || dev.Looped() == 0) {
		time.Sleep(50 * time.Millisecond)
	}
	st, err := QueryVirtioStatus(ctx, c, "net1")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%.1f s after cont: VDUSE status %#x, looped %d; QEMU vhost-started %v, guest %v", time.Since(t0).Seconds(), dev.Status(), dev.Looped(), st.VhostStarted, st.Guest.Names())
	if dev.Status()&4 == 0 || !st.VhostStarted || !st.DriverOK() {
		t.Errorf("no DRIVER_OK through attach's vhost-vdpa netdev")
	}
	if dev.Looped() == 0 {
		t.Errorf("no frame crossed the vDPA data path")
	}
	if _, err := c.Execute(ctx, "system_reset", nil); err != nil {
		t.Fatal(err)
	}
	// The reset alone does not unplug: device_del first, then a reset.
	err = attach.Detach(ctx, attach.DetachRequest{QMP: g.QMP2, ID: "net1", StateDir: stateDir, Timeout: 3 * time.Second, Retry: 2 * time.Second})
	if errors.Is(err, attach.ErrTimeout) {
		if _, err := c.Execute(ctx, "system_reset", nil); err != nil {
			t.Fatal(err)
		}
		err = attach.Detach(ctx, attach.DetachRequest{QMP: g.QMP2, ID: "net1", StateDir: stateDir, Timeout: 10 * time.Second})
	}
	if err != nil {
		t.Fatalf("detach: %v", err)
	}
	if qemuHolds(g.PID, "/dev/vhost-vdpa-0") || qemuHolds(g.PID, "vhost-vdpa-1") {
		t.Errorf("after detach QEMU still holds the vhost-vdpa fd")
	}
	if ls, err := attach.List(ctx, attach.ListRequest{StateDir: stateDir}); err != nil || len(ls) != 0 {
		t.Errorf("list after detach: %v %+v", err, ls)
	}
}
