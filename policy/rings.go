package policy

import "github.com/netctl/netctl/virtio"

// RingFeature is a transport or ring feature that every backend must
// carry (vhost-net and vDPA in the kernel or the device, the userspace path
// in QEMU), and the virtio-net-pci property that keeps QEMU from offering
// it.
type RingFeature struct {
	F     virtio.Features
	Prop  string // QEMU property
	Value string // the property's value that drops F
	QEMU  string // first QEMU with the property, "" for old ones
}

// RingFeatures lists them, in bit order.
var RingFeatures = []RingFeature{
	{virtio.NetMrgRxbuf, "mrg_rxbuf", "off", ""},
	{virtio.IndirectDesc, "indirect_desc", "off", ""},
	{virtio.EventIdx, "event_idx", "off", ""},
	{virtio.Version1, "disable-modern", "on", ""}, // a legacy-only device
	{virtio.RingReset, "queue_reset", "off", "7.2"},
}

// managed is every bit Decide and Plan decide about: what they offer is a
// subset, and each of these left out becomes a QEMU property.
var managed = func() []managedBit {
	var m []managedBit
	for _, o := range Offloads {
		m = append(m, managedBit{o.F, o.Prop, "off", o.QEMU})
	}
	for _, r := range RingFeatures {
		m = append(m, managedBit{r.F, r.Prop, r.Value, r.QEMU})
	}
	return m
}()

type managedBit struct {
	f           virtio.Features
	prop, value string
	qemu        string
}

// userspaceRing is what QEMU's own virtio-net emulation (vhost=off)
// offers of the ring features.
const userspaceRing = virtio.Version1 | virtio.NetMrgRxbuf | virtio.EventIdx | virtio.IndirectDesc | virtio.RingReset
