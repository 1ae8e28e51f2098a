package probe

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/policy/host"
	"github.com/netctl/netctl/test/vduse"
	"github.com/netctl/netctl/vdpa"
)

// TestVMProbeVDPAMigration: on 6.12, netctl probe says of a VDUSE device
// that this host cannot migrate it (the VM has no QEMU) and what the
// device itself answers: backend features 0xe (IOTLB_ASID is offered by
// vhost-vdpa for every parent), no SUSPEND, one group, one address
// space, no control virtqueue. With those facts QEMU 7.2 (Debian 12)
// refuses (x-svq), QEMU 9.2 would migrate it with a reset. While a
// process holds the device, the probe does not open it and says "unknown:
// in use". On 6.1 there is no vdpa, so no device and no answer.
func TestVMProbeVDPAMigration(t *testing.T) {
	k := testenv.VM(t)
	if !k.Has("vdpa") {
		r, err := ProbeFull(nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.VDPA.Available || len(r.VDPA.Devices) != 0 || !strings.Contains(r.VDPA.Error, "no vdpa support") {
			t.Errorf("vdpa on %s: %+v", k.Name, r.VDPA)
		}
		b, _ := json.Marshal(r.VDPA)
		if strings.Contains(string(b), "migration") {
			t.Errorf("vdpa section on %s mentions migration: %s", k.Name, b)
		}
		return
	}
	dev, err := vduse.Create(vduse.Config{Name: "migvdpa0"})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	c, err := vdpa.Dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.AddDevice(context.Background(), vdpa.AddOptions{Name: "migvdpa0", MgmtDev: "vduse"}); err != nil {
		t.Fatal(err)
	}
	defer c.DeleteDevice(context.Background(), "migvdpa0")
	find := func(r *Result) host.VDPADevice {
		t.Helper()
		i := slices.IndexFunc(r.VDPA.Devices, func(d host.VDPADevice) bool { return d.Name == "migvdpa0" })
		if i < 0 {
			t.Fatalf("no migvdpa0 in %+v", r.VDPA)
		}
		return r.VDPA.Devices[i]
	}
	r, err := ProbeFull(nil)
	if err != nil {
		t.Fatal(err)
	}
	m := find(r).Migration
	if m == nil || m.Facts == nil {
		t.Fatalf("no migration answer with facts: %+v", m)
	}
	f := *m.Facts
	if f.BackendFeatures != "0xe" || f.Groups != 1 || f.AddressSpaces != 1 || f.VQs != 2 || f.CVQOwnGroup != nil || f.GroupError != "" ||
		f.Features != "0x320018028" {
		t.Errorf("facts %+v", f)
	}
	if m.OK || m.Suspend || !strings.Contains(m.Reason, "no QEMU on this host") || !strings.Contains(m.Reason, "no VHOST_BACKEND_F_SUSPEND") {
		t.Errorf("answer without QEMU: %+v", m)
	}
	r.Hostname = "vm-6-12" // the VM has none; plan would refuse "(none)"
	if err := r.Validate(); err != nil {
		t.Error(err)
	}
	if m := policy.VDPAMigration("7.2.22", f); m.OK || !strings.Contains(m.Reason, "x-svq=on") {
		t.Errorf("QEMU 7.2.22: %+v", m)
	}
	if m := policy.VDPAMigration("9.2.0", f); !m.OK || m.Suspend {
		t.Errorf("QEMU 9.2.0: %+v", m)
	}
	b, _ := json.Marshal(find(r))
	t.Logf("probe: %s", b)

	// Held by another process (a VM): not opened.
	path, err := vdpa.VhostVDPAPath("migvdpa0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	held, err := vdpa.OpenVhost(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	r, err = ProbeFull(nil)
	if err != nil {
		t.Fatal(err)
	}
	if m := find(r).Migration; m == nil || m.OK || m.Facts != nil || !strings.HasPrefix(m.Reason, "unknown: in use by pid ") || !strings.Contains(m.Reason, path) {
		t.Errorf("held device: %+v", m)
	}
	// The probe left the holder's fd alone: it still answers.
	if _, err := held.BackendFeatures(); err != nil {
		t.Errorf("the holder's fd after the probe: %v", err)
	}
}
