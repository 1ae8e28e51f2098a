package hook

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/policy"
)

// TestDomainTypeQEMUGetsNoVhostNet: libvirt opens /dev/vhost-net only
// for a domain of type 'kvm' (qemuInterfaceOpenVhostNet). On a type='qemu'
// domain the hook never decides (nor records, nor reports) vhost-net:
// <driver name='vhost'>, which libvirt itself passes by there, leaves the
// choice to the chain, whose vhost-net step says why; metadata asking
// for backend="vhost-net" is refused at prepare with that reason,
// leaving nothing behind. Before, the hook recorded vhost-net while QEMU
// ran its userspace virtio-net.
func TestDomainTypeQEMUGetsNoVhostNet(t *testing.T) {
	f := newFake(t)
	h, _, vd := newTestHook(t, f)
	ctx := context.Background()
	qemuDom := func(x []byte) []byte {
		return bytes.Replace(x, []byte("<domain type='kvm'>"), []byte("<domain type='qemu'>"), 1)
	}
	noMeta := func(x []byte) []byte {
		return bytes.Replace(x, []byte(`backend="vhost-net" `), nil, 1)
	}
	// <driver name='vhost'> only: the chain, with the reason.
	_, ds, err := h.Decide(ctx, qemuDom(noMeta(allXML(t, vd))))
	if err != nil {
		t.Fatal(err)
	}
	tap := ds[0]
	if tap.Interface.Kind != KindTap || tap.Interface.Driver != "vhost" || tap.Decision.Backend != policy.BackendUserspace {
		t.Fatalf("tap of a type='qemu' domain with <driver name='vhost'>: %+v (want userspace)", tap)
	}
	var why string
	for _, s := range tap.Decision.Steps {
		if s.Backend == policy.BackendVhostNet {
			why = s.Reason
		}
	}
	if !strings.Contains(why, "type 'kvm'") {
		t.Errorf("vhost-net's step: %q (want the domain type's reason)", why)
	}
	// The same domain as type='kvm' still gets vhost-net.
	if _, ds, err = h.Decide(ctx, noMeta(allXML(t, vd))); err != nil || ds[0].Decision.Backend != policy.BackendVhostNet {
		t.Fatalf("type='kvm': %v %+v", err, ds)
	}
	// Metadata asking for vhost-net on a type='qemu' domain: refused,
	// nothing made.
	before := f.snapshot()
	_, err = h.Run(ctx, "netctl-all", "prepare", "begin", bytes.NewReader(qemuDom(allXML(t, vd))))
	if err == nil || !strings.Contains(err.Error(), "type 'kvm'") {
		t.Fatalf("prepare of a type='qemu' domain whose metadata asks for vhost-net: %v (want a refusal naming type 'kvm')", err)
	}
	if errors.Is(err, errs.ErrInvalid) {
		t.Errorf("refusal wraps ErrInvalid: %v", err)
	}
	if got := f.snapshot(); got != before {
		t.Errorf("devices after the refusal: %s (before %s)", got, before)
	}
	if recs, _, _ := h.Store.ListDomains(); len(recs) != 0 {
		t.Errorf("refusal left records %v", recs)
	}
}
