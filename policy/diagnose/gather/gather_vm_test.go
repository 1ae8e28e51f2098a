package gather

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/policy/diagnose"
	"github.com/netctl/netctl/test/vduse"
	"github.com/netctl/netctl/vdpa"
	"github.com/netctl/netctl/virtio"
)

// TestVMReadVDPA reads a vhost-vdpa backend the way diagnose reads QEMU's:
// from a process's file descriptors (this test holds the vhost-vdpa fd of
// a VDUSE device it negotiated features with), then the vdpa family.
func TestVMReadVDPA(t *testing.T) {
	k := testenv.VM(t)
	s := &diagnose.Snapshot{Netdev: diagnose.Netdev{Type: "vhost-vdpa"}}
	c, err := vdpa.Dial(context.Background())
	if !k.Has("vhost_vdpa") {
		// 6.1: no vdpa. The kernel has no vdpa family and no vhost-vdpa
		// node, and diagnose says so instead of counting devices.
		if !errors.Is(err, vdpa.ErrNoVDPA) || !strings.Contains(err.Error(), "no vdpa support loaded") {
			t.Fatalf("vdpa.Dial on %s: %v; want the \"no vdpa support\" error (ErrNoVDPA)", k.Name, err)
		}
		if nodes, _ := filepath.Glob("/dev/vhost-vdpa-*"); len(nodes) != 0 {
			t.Errorf("%s has no vhost-vdpa, yet %v exist", k.Name, nodes)
		}
		readVDPA(context.Background(), s, os.Getpid())
		if s.VDPA != nil || len(s.Errors) != 1 || !strings.Contains(s.Errors[0], "holds no vhost-vdpa device") ||
			!strings.Contains(s.Errors[0], "no vdpa support loaded") {
			t.Errorf("no vdpa: %+v, %v", s.VDPA, s.Errors)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// No vhost-vdpa fd open yet: the family is there, so the note counts.
	readVDPA(context.Background(), s, os.Getpid())
	if s.VDPA != nil || len(s.Errors) != 1 || !strings.Contains(s.Errors[0], "holds 0 vhost-vdpa devices") {
		t.Errorf("no vhost-vdpa fd: %+v, %v", s.VDPA, s.Errors)
	}
	s.Errors = nil
	dev, err := vduse.Create(vduse.Config{Name: "diagvdpa0"})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if err := c.AddDevice(context.Background(), vdpa.AddOptions{Name: "diagvdpa0", MgmtDev: "vduse"}); err != nil {
		t.Fatal(err)
	}
	defer c.DeleteDevice(context.Background(), "diagvdpa0")
	path, err := vdpa.VhostVDPAPath("diagvdpa0")
	if err != nil {
		t.Fatal(err)
	}
	if name, err := vdpa.DeviceOfVhost(path); err != nil || name != "diagvdpa0" {
		t.Errorf("DeviceOfVhost(%s) = %q, %v", path, name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := vdpa.OpenVhost(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close() // before the delete: deleting waits for the fd
	if err := d.SetOwner(); err != nil {
		t.Fatal(err)
	}
	acked := virtio.Version1 | virtio.AccessPlatform | virtio.NetMrgRxbuf | virtio.NetMAC | virtio.NetCsum
	for _, step := range []func() error{
		func() error { return d.SetStatus(linux.VIRTIO_CONFIG_S_ACKNOWLEDGE | linux.VIRTIO_CONFIG_S_DRIVER) },
		func() error { return d.SetFeatures(uint64(acked)) },
		func() error {
			return d.SetStatus(linux.VIRTIO_CONFIG_S_ACKNOWLEDGE | linux.VIRTIO_CONFIG_S_DRIVER | linux.VIRTIO_CONFIG_S_FEATURES_OK)
		},
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	readVDPA(context.Background(), s, os.Getpid())
	v := s.VDPA
	if v == nil || v.Device != "diagvdpa0" || v.VhostPath != path || v.MgmtDev != "vduse" || !v.HasNegotiated ||
		virtio.Features(v.Negotiated) != acked || virtio.Features(v.Features) != vduse.DefaultFeatures || len(s.Errors) > 0 {
		t.Fatalf("vdpa state %+v, errors %v", v, s.Errors)
	}
	// A guest that acknowledged HOST_TSO4 too: the device did not take it.
	guest := acked | virtio.NetHostTSO4
	st, _ := json.Marshal(map[string]any{"name": "virtio-net", "device-id": 1,
		"host-features":  map[string]any{"unknown-dev-features": uint64(guest)},
		"guest-features": map[string]any{"unknown-dev-features": uint64(guest)},
		"status":         map[string]any{"statuses": []string{"VIRTIO_CONFIG_S_FEATURES_OK: x"}}})
	s.Status = st
	r, err := diagnose.Explain(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range r.Features {
		if x.Feature == "HOST_TSO4" && (x.Verdict != "off" || !strings.Contains(x.Reason, "vdpa device diagvdpa0 did not negotiate it")) {
			t.Errorf("HOST_TSO4: %+v", x)
		}
		if x.Feature == "CSUM" && (x.Verdict != "on" || x.Backend != "yes") {
			t.Errorf("CSUM: %+v", x)
		}
	}
}
