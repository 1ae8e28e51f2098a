package vhostnet

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/virtio"
)

// vhostNetFeatures is what VHOST_GET_FEATURES returns on each VM kernel.
// 6.1 lacks RING_RESET (bit 40), which vhost-net gained in 6.3.
var vhostNetFeatures = map[string]virtio.Features{
	"6.12": 0x1033d008000,
	"6.1":  0x33d008000,
}

func TestVMOpenOwnerFeatures(t *testing.T) {
	k := testenv.VM(t)
	if !k.Has("vhost_net") {
		t.Fatalf("every VM kernel is expected to have vhost-net; kernel %s does not say so", k.Name)
	}
	fds := testenv.OpenFDs(t)
	d, err := Open()
	if err != nil {
		t.Fatalf("kernel %s has vhost-net: %v", k.Name, err)
	}
	if err := d.SetOwner(); err != nil {
		t.Fatal(err)
	}
	if err := d.SetOwner(); !errors.Is(err, unix.EBUSY) {
		t.Errorf("second SET_OWNER: got %v, want EBUSY", err)
	}
	f, err := d.Features()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kernel %s: VHOST_GET_FEATURES = %#x (%v)", k.Name, uint64(f), f)
	want, ok := vhostNetFeatures[k.Name]
	if !ok {
		t.Fatalf("no expected feature mask recorded for kernel %s", k.Name)
	}
	if hasRR := map[string]bool{"6.12": true, "6.1": false}[k.Name]; f.Has(virtio.RingReset) != hasRR {
		t.Errorf("kernel %s: RING_RESET offered %v, want %v (vhost-net gained it in 6.3)", k.Name, f.Has(virtio.RingReset), hasRR)
	}
	if f != want {
		t.Errorf("kernel %s: features %#x (%v), want %#x (%v)", k.Name, uint64(f), f, uint64(want), want)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if n := testenv.OpenFDs(t); n != fds {
		t.Errorf("%d fds open after Close, %d before", n, fds)
	}
}
