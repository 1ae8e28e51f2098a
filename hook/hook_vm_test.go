package hook

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/state"
	"github.com/netctl/netctl/test/l2"
	"github.com/netctl/netctl/test/vduse"
	"github.com/netctl/netctl/vdpa"
)

// vdpaXML is a domain with one vdpa interface that netctl publishes; the
// path is as the VM's root sees it (the nested QEMU, chrooted in
// l2.Root, sees it without the prefix).
func vdpaXML(dir, name string) []byte { return vdpaXMLWith(dir, name, "") }

// vdpaXMLWith is vdpaXML with a <driver> element in the interface.
func vdpaXMLWith(dir, name, driver string) []byte {
	return []byte(`<domain type='qemu'>
  <name>hookvdpa</name>
  <metadata>
    <netctl:hook xmlns:netctl="http://netctl.dev/xmlns/hook/1">
      <netctl:interface mac="52:54:00:95:db:c0" mgmtdev="vduse" backend="vdpa"/>
    </netctl:hook>
  </metadata>
  <memory unit='KiB'>262144</memory>
  <os><type arch='x86_64' machine='q35'>hvm</type></os>
  <devices>
    <interface type='vdpa'>
      <mac address='52:54:00:95:db:c0'/>
      <source dev='` + dir + `/` + name + `'/>
      ` + driver + `
    </interface>
  </devices>
</domain>`)
}

func vmHook(t *testing.T, run string) *Hook {
	t.Helper()
	st, err := state.Open(run)
	if err != nil {
		t.Fatal(err)
	}
	cfg := cfgWith(t, `{"vdpa_dir": "`+filepath.Join(l2.Root, "run/netctl/vdpa")+`", "timeout": "60s"}`)
	return &Hook{Config: cfg, Store: st, Devices: RealDevices{}}
}

// TestVMHookVDPA: prepare for a type='vdpa' interface with management
// device vduse creates the vdpa device, binds it to vhost_vdpa and
// publishes /run/netctl/vdpa/NAME; a nested QEMU opens that path with
// -netdev vhost-vdpa; release deletes the device and the link, a second
// release is fine; a device someone deleted and added again under the
// name after prepare (another sysfs directory) survives the release; and
// the VDUSE device is destroyed cleanly. On a
// kernel without vDPA, prepare fails with the clear "no vdpa" error and
// leaves nothing. A domain forcing an offload the VDUSE device does not
// offer (<host csum='on'/>: the test device has no CSUM) is refused with
// the attribute and the device's reason, and the vdpa device the prepare
// created is deleted again, nothing published or recorded.
func TestVMHookVDPA(t *testing.T) {
	testenv.Require(t, "vduse", func(m *testenv.Missing) {
		h := vmHook(m.T, m.TempDir())
		_, err := h.Run(context.Background(), "hookvdpa", "prepare", "begin", bytes.NewReader(vdpaXML(h.Config.VDPADir, "netctl-h1")))
		m.Logf("prepare without vDPA: %v", err)
		m.Err(err, errs.ErrNotAvailable, "vdpa")
		ds, _, _ := h.Store.ListDomains()
		m.Check(len(ds) == 0, "a record was left: %v", ds)
		_, lerr := os.Lstat(filepath.Join(h.Config.VDPADir, "netctl-h1"))
		m.Check(errors.Is(lerr, os.ErrNotExist), "a published link was left: %v", lerr)
	})
	if err := l2.Chroot(); err != nil {
		t.Fatal(err)
	}
	dev, err := vduse.Create(vduse.Config{Name: "netctl-h1"})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			dev.Close()
		}
	}()
	h := vmHook(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// Forced on, not offered by the device: refused after the device
	// was made (its features are read from it), and the device is gone.
	forced := vdpaXMLWith(h.Config.VDPADir, "netctl-h1", "<driver><host csum='on'/><guest csum='off'/></driver>")
	_, err = h.Run(ctx, "hookvdpa", "prepare", "begin", bytes.NewReader(forced))
	t.Logf("prepare forcing <host csum='on'/>: %v", err)
	if !errors.Is(err, errs.ErrNotSupported) || !strings.Contains(err.Error(), "<driver><host csum='on'/> (CSUM) cannot be honoured: vdpa device netctl-h1 does not offer it (backend vdpa)") {
		t.Errorf("prepare forcing <host csum='on'/> on the VDUSE device: %v", err)
	}
	if _, err := os.Stat("/sys/bus/vdpa/devices/netctl-h1"); !os.IsNotExist(err) {
		t.Errorf("vdpa device netctl-h1 after the refused prepare: %v (want deleted)", err)
	}
	if _, err := os.Lstat(filepath.Join(h.Config.VDPADir, "netctl-h1")); !os.IsNotExist(err) {
		t.Errorf("published link after the refused prepare: %v", err)
	}
	if ds, _, _ := h.Store.ListDomains(); len(ds) != 0 {
		t.Errorf("a refused prepare left a record: %+v", ds[0])
	}

	xml := vdpaXML(h.Config.VDPADir, "netctl-h1")
	res, err := h.Run(ctx, "hookvdpa", "prepare", "begin", bytes.NewReader(xml))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("prepare: %v %v", res.Done, res.Notes)
	if rec, err := h.Store.LoadDomain("hookvdpa"); err != nil || len(rec.Interfaces) != 1 || rec.Interfaces[0].Backend != "vdpa" || rec.Interfaces[0].Kind != "vdpa" {
		t.Errorf("the record's decision: %+v, %v", rec, err)
	}
	link := filepath.Join(h.Config.VDPADir, "netctl-h1")
	target, err := os.Readlink(link)
	if err != nil || !strings.HasPrefix(target, "/dev/vhost-vdpa-") {
		t.Fatalf("published %s -> %q, %v", link, target, err)
	}
	if st, err := os.Stat(link); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("%s does not lead to a char device: %v", link, err)
	}
	if drv, err := os.Readlink("/sys/bus/vdpa/devices/netctl-h1/driver"); err != nil || filepath.Base(drv) != "vhost_vdpa" {
		t.Errorf("netctl-h1's driver: %q, %v", drv, err)
	}
	if _, err := h.Run(ctx, "hookvdpa", "started", "begin", bytes.NewReader(xml)); err != nil {
		t.Fatal(err)
	}

	// QEMU (chrooted in l2.Root, shared RAM for VDUSE) opens the path the
	// XML names, as libvirt would hand it over.
	inChroot := strings.TrimPrefix(link, l2.Root)
	pid, stop := startQEMUWith(t, "hookvdpa", "-netdev", "vhost-vdpa,vhostdev="+inChroot+",id=n0",
		"-device", "virtio-net-pci,netdev=n0,mac=52:54:00:95:db:c0,bus=rp1")
	fds, err := l2.FDs(pid)
	if err != nil {
		t.Fatal(err)
	}
	if fds[l2.Root+target] != 1 { // QEMU opened it inside the chroot
		t.Errorf("QEMU's fds %v: want %s once", fds, l2.Root+target)
	}
	stop()

	if _, err := h.Run(ctx, "hookvdpa", "release", "end", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/sys/bus/vdpa/devices/netctl-h1"); !os.IsNotExist(err) {
		t.Errorf("vdpa device netctl-h1 after release: %v", err)
	}
	if _, err := os.Lstat(link); !os.IsNotExist(err) {
		t.Errorf("%s after release: %v", link, err)
	}
	if _, err := h.Run(ctx, "hookvdpa", "release", "end", nil); err != nil {
		t.Errorf("second release: %v", err)
	}

	// Someone deletes netctl's device and adds their own under the name
	// (vdpa dev del; vdpa dev add): the kernel gives the new one another
	// sysfs directory, and release leaves it alone.
	if _, err := h.Run(ctx, "hookvdpa", "prepare", "begin", bytes.NewReader(xml)); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat("/sys/bus/vdpa/devices/netctl-h1")
	if err != nil {
		t.Fatal(err)
	}
	if err := vdpa.Remove(ctx, "netctl-h1"); err != nil {
		t.Fatal(err)
	}
	c, err := vdpa.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = c.AddDevice(ctx, vdpa.AddOptions{Name: "netctl-h1", MgmtDev: "vduse"})
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat("/sys/bus/vdpa/devices/netctl-h1")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("netctl-h1's sysfs inode: %d as netctl made it, %d as re-added", before.Sys().(*syscall.Stat_t).Ino, after.Sys().(*syscall.Stat_t).Ino)
	res, err = h.Run(ctx, "hookvdpa", "release", "end", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("release of a re-added device: %v %v", res.Done, res.Notes)
	if _, err := os.Stat("/sys/bus/vdpa/devices/netctl-h1"); err != nil {
		t.Errorf("release deleted netctl-h1, which someone re-added after netctl made it: %v", err)
	}
	if _, err := h.Store.LoadDomain("hookvdpa"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("record after release: %v", err)
	}
	if err := vdpa.Remove(ctx, "netctl-h1"); err != nil {
		t.Fatal(err)
	}

	closed = true
	if err := dev.Close(); err != nil {
		t.Errorf("destroying the VDUSE device after release: %v", err)
	}
}

// startQEMUWith starts a paused QEMU chrooted in l2.Root with shared RAM
// and extra arguments, waits for its QMP socket, and returns its pid and
// a stop function.
func startQEMUWith(t *testing.T, name string, extra ...string) (int, func()) {
	t.Helper()
	q := l2.StartChrootQEMUForTest(t, l2.ChrootQEMU{Name: name, SharedRAM: true, Extra: extra})
	return q.PID, q.Stop
}
