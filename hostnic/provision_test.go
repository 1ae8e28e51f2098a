package hostnic

import (
	"testing"

	testpool "github.com/netctl/netctl/test/pool"
	"github.com/netctl/netctl/vdpa"
	"github.com/netctl/netctl/virtio"
)

// TestProvisioned: a management device that says what it supports gets
// device_features without the managed bits the pool leaves out (and
// keeps the others: MAC, CTRL_VQ, ACCESS_PLATFORM, ...); without a pool,
// without the attribute (VDUSE's), or when nothing would change, none.
func TestProvisioned(t *testing.T) {
	pool := testpool.VMKernels(t) // no RING_RESET, no USO
	sup := virtio.NetCsum | virtio.NetGuestCsum | virtio.NetMAC | virtio.NetCtrlVQ | virtio.Version1 | virtio.AccessPlatform |
		virtio.RingReset | virtio.NetHostUSO
	m := vdpa.MgmtDev{Name: "mlx", DevFeatures: sup, HasDevFeatures: true}
	got := Provisioned(m, pool)
	if want := sup &^ (virtio.RingReset | virtio.NetHostUSO); got != want {
		t.Errorf("provisioned %v, want %v", got, want)
	}
	for _, c := range []struct {
		m    vdpa.MgmtDev
		name string
	}{
		{vdpa.MgmtDev{Name: "vduse"}, "no supported features said"},
		{vdpa.MgmtDev{Name: "x", DevFeatures: sup &^ (virtio.RingReset | virtio.NetHostUSO), HasDevFeatures: true}, "nothing outside the plan"},
	} {
		if f := Provisioned(c.m, pool); f != 0 {
			t.Errorf("%s: %v, want none", c.name, f)
		}
	}
	if f := Provisioned(m, nil); f != 0 {
		t.Errorf("no pool: %v", f)
	}
}
