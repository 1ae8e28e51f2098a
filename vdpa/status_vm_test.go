package vdpa

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/virtio"
)

const ackDriver = uint8(linux.VIRTIO_CONFIG_S_ACKNOWLEDGE | linux.VIRTIO_CONFIG_S_DRIVER)

func openRefusing(t *testing.T, name string, refuse uint8) (*VhostDevice, func()) {
	t.Helper()
	c := vdpaClient(t, "vhost_vdpa")
	dev, path := addVDUSE(t, c, name)
	dev.RefuseStatus(refuse)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := OpenVhost(ctx, path)
	if err != nil {
		c.DeleteDevice(bg, name)
		dev.Close()
		t.Fatal(err)
	}
	return d, func() { d.Close(); c.DeleteDevice(bg, name); dev.Close() }
}

// offerFeatures takes the device as far as FEATURES_OK: owner,
// ACKNOWLEDGE|DRIVER, and the features.
func offerFeatures(t *testing.T, d *VhostDevice) {
	t.Helper()
	if err := d.SetOwner(); err != nil {
		t.Fatal(err)
	}
	if err := d.SetStatus(ackDriver); err != nil {
		t.Fatal(err)
	}
	if err := d.SetFeatures(uint64(virtio.Version1 | virtio.AccessPlatform)); err != nil {
		t.Fatal(err)
	}
}

// A status write that sets FEATURES_OK together with DRIVER_OK on a
// device that refuses FEATURES_OK fails: the status is read back after
// every write (for a while it was not after one with DRIVER_OK, and the
// caller went on with a device that never accepted the features).
func TestVMSetStatusFeaturesOKRefusedWithDriverOK(t *testing.T) {
	d, done := openRefusing(t, "vhrev0", linux.VIRTIO_CONFIG_S_FEATURES_OK)
	defer done()
	offerFeatures(t, d)
	err := d.SetStatus(ackDriver | linux.VIRTIO_CONFIG_S_FEATURES_OK | linux.VIRTIO_CONFIG_S_DRIVER_OK)
	st, _ := d.Status()
	t.Logf("SetStatus: %v; status now %#x", err, st)
	if err == nil {
		t.Fatalf("FEATURES_OK|DRIVER_OK on a device that refused FEATURES_OK: no error (status %#x)", st)
	}
}

// A device that fails DRIVER_OK (mlx5's setup_driver failing sets FAILED
// and leaves DRIVER_OK clear; a VDUSE daemon answering FAILED) is not
// reported as started: SetStatus reads the status back after every write,
// as QEMU's vhost_vdpa_add_status does (it fails with EIO when a bit did
// not stick).
func TestVMSetStatusDriverOKRefused(t *testing.T) {
	d, done := openRefusing(t, "vhrev1", linux.VIRTIO_CONFIG_S_DRIVER_OK)
	defer done()
	offerFeatures(t, d)
	if err := d.SetStatus(ackDriver | linux.VIRTIO_CONFIG_S_FEATURES_OK); err != nil {
		t.Fatal(err)
	}
	err := d.SetStatus(ackDriver | linux.VIRTIO_CONFIG_S_FEATURES_OK | linux.VIRTIO_CONFIG_S_DRIVER_OK)
	st, _ := d.Status()
	t.Logf("SetStatus: %v; status now %#x", err, st)
	if err == nil || !strings.Contains(err.Error(), "did not start") {
		t.Fatalf("DRIVER_OK refused by the device (status %#x) but SetStatus returned nil", st)
	}
}

// DeviceName and MapMode first asked after Close still answer: the node's
// device number is taken at open (a lazy fstat failed with ErrClosed after
// Close, and they were "" and MapUnknown for good, silently).
func TestVMDeviceNameAfterClose(t *testing.T) {
	d, done := openRefusing(t, "vhrev2", 0)
	defer done()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if name, mode := d.DeviceName(), d.MapMode(); name != "vhrev2" || mode != MapVA {
		t.Fatalf("after Close: device %q, map mode %v; want vhrev2, va (as before the lazy fstat)", name, mode)
	}
}

// vhost-vdpa's SET_OWNER starts no worker (use_worker false): no
// vhost-PID task appears among this process's threads, so the signal
// mask vhost-net's SET_OWNER needs is not needed here. (Passes: it checks
// the premise of SetOwnerNoWorker on the running kernel.)
func TestVMSetOwnerForksNoWorker(t *testing.T) {
	d, done := openRefusing(t, "vhrev3", 0)
	defer done()
	workers := func() int {
		es, _ := os.ReadDir("/proc/self/task")
		n := 0
		for _, e := range es {
			b, _ := os.ReadFile("/proc/self/task/" + e.Name() + "/comm")
			if strings.HasPrefix(string(b), "vhost-") {
				n++
			}
		}
		return n
	}
	before := workers()
	if err := d.SetOwner(); err != nil {
		t.Fatal(err)
	}
	if after := workers(); after != before {
		t.Fatalf("vhost-* threads %d -> %d after vhost-vdpa SET_OWNER", before, after)
	}
}
