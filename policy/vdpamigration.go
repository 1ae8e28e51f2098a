package policy

import (
	"fmt"
	"strings"

	"github.com/netctl/netctl/policy/host"
	"github.com/netctl/netctl/virtio"
)

// QEMU live-migrates a vhost-vdpa NIC only through shadow virtqueues
// (SVQ): for the migration QEMU puts itself between the guest's rings and
// the device, so that it sees every buffer the device writes and can
// mark the guest's pages dirty. The rules below are QEMU's, with the
// release each came in:
//
//   - Before 7.0 there are no shadow virtqueues. vhost-vdpa does not offer
//     VHOST_F_LOG_ALL, so vhost_dev_init (hw/virtio/vhost.c) sets the
//     blocker qemuLogAllBlocker.
//   - 7.0 to 7.2 (Debian 12 has 7.2): shadow virtqueues only with the
//     experimental netdev option x-svq=on, for the VM's whole life;
//     vhost_vdpa_get_features (hw/virtio/vhost-vdpa.c) adds
//     VHOST_F_LOG_ALL only then ("if (ret == 0 && v->shadow_vqs_enabled)",
//     until "vdpa: return VHOST_F_LOG_ALL in vhost-vdpa devices", pulled
//     March 2023 for 8.0). netctl (attach, the libvirt face) does
//     not set x-svq, so the same blocker applies. Checked on Debian 12's
//     qemu-system-x86_64 7.2.22: its strings have qemuLogAllBlocker and
//     none of the CVQ blockers below (7.0/7.1's "Migration disabled:
//     vhost-vdpa uses CVQ." was removed by "vdpa: Delete CVQ migration
//     blocker", Aug 2022).
//   - From 8.0 QEMU switches a running device to shadow virtqueues when a
//     migration starts (vdpa_net_migration_state_notifier,
//     net/vhost-vdpa.c) and blocks migration at netdev creation when
//     shadow virtqueues cannot drive the device: qemuNetSVQBlocker from
//     vhost_vdpa_net_valid_svq_features (net/vhost-vdpa.c, set for queue
//     pair 0 in net_vhost_vdpa_init) for a device-specific bit outside
//     vdpa_svq_device_features, qemuSVQBlocker from
//     vhost_svq_valid_features (hw/virtio/vhost-shadow-virtqueue.c) for a
//     transport bit SVQ cannot use. 8.0 and 8.1 also block every device
//     with a control virtqueue: qemuCVQBlocker.
//   - 8.2 removed that ("vdpa: remove net cvq migration blocker", pulled
//     Oct 2023): a control virtqueue is shadowed from the start, so QEMU
//     knows the MAC, MQ and RX state the guest set, but only if the
//     device offers VHOST_BACKEND_F_IOTLB_ASID and the control queue is in
//     a virtqueue group of its own (VHOST_VDPA_GET_VRING_GROUP of the last
//     queue differs from every data queue's), which QEMU then moves to
//     address space 1 (VHOST_VDPA_SET_GROUP_ASID); a parent without groups
//     (GET_VRING_GROUP: EOPNOTSUPP) counts as not isolated ("The kernel
//     report VHOST_BACKEND_F_IOTLB_ASID if the vdpa frontend support ASID
//     even if the parent driver does not", vhost_vdpa_probe_cvq_isolation).
//     Otherwise, in QEMU's
//     words (vhost_vdpa_net_cvq_start): "If we early return in these
//     cases SVQ will not be enabled. The migration will be blocked as
//     long as vhost-vdpa backends will not offer _F_LOG."
//   - VHOST_BACKEND_F_SUSPEND is not required: without it vhost_vdpa_suspend
//     (hw/virtio/vhost-vdpa.c) resets the device instead, and the ring
//     state is recovered from the guest's rings ("Cannot trust in value
//     returned by device, let vhost recover used idx from guest"): the
//     switch to shadow virtqueues and the switchover take longer and drop
//     what was in flight.
const (
	qemuLogAllBlocker = "Migration disabled: vhost lacks VHOST_F_LOG_ALL feature."
	qemuCVQBlocker    = "net vdpa cannot migrate with CVQ feature"
	qemuNetSVQBlocker = "vdpa svq does not work with features %#x"              // "0x%" PRIx64
	qemuSVQBlocker    = "SVQ Invalid device feature flags, offer: %#x, ok: %#x" // "0x%"PRIx64
)

// svqNetFeatures is vdpa_svq_device_features (net/vhost-vdpa.c, QEMU 9.x):
// the device-specific bits shadow virtqueues can carry. It grew during
// 8.x-9.x (CTRL_RX, CTRL_VLAN, CTRL_RX_EXTRA, CTRL_GUEST_OFFLOADS, RSS,
// HASH_REPORT): an older 8.x may refuse a bit accepted here, with the same
// blocker message.
const svqNetFeatures = virtio.NetCsum | virtio.NetGuestCsum | virtio.NetCtrlGuestOffloads | virtio.NetMTU | virtio.NetMAC |
	virtio.NetGuestTSO4 | virtio.NetGuestTSO6 | virtio.NetGuestECN | virtio.NetGuestUFO |
	virtio.NetHostTSO4 | virtio.NetHostTSO6 | virtio.NetHostECN | virtio.NetHostUFO |
	virtio.NetMrgRxbuf | virtio.NetStatus | virtio.NetCtrlVQ | virtio.NetCtrlRx | virtio.NetCtrlVLAN |
	virtio.NetCtrlRxExtra | virtio.NetMQ | virtio.AnyLayout | virtio.NetCtrlMACAddr | virtio.LogAll |
	virtio.NetHashReport | virtio.NetRSS | virtio.NetRSCExt | virtio.NetStandby | virtio.NetSpeedDuplex

// The transport bits, VIRTIO_TRANSPORT_F_START (28) to _END (41) in the
// headers QEMU 7.2-9.x import.
const transportStart, transportEnd = 28, 41

// svqNetInvalid is what vhost_vdpa_net_valid_svq_features refuses: a
// device-specific bit outside svqNetFeatures (the transport bits, masked
// with MAKE_64BIT_MASK(START, END-START), are left to svqTransport).
func svqNetInvalid(f virtio.Features) virtio.Features {
	var transport virtio.Features
	for b := uint(transportStart); b < transportEnd; b++ {
		transport |= virtio.Bit(b)
	}
	return f &^ svqNetFeatures &^ transport
}

// svqTransport is vhost_svq_valid_features: it returns the word QEMU
// would accept ("ok") and whether f is it. VERSION_1 and ACCESS_PLATFORM
// are required; EVENT_IDX passes, and ORDER_PLATFORM from 8.0 ("vdpa:
// accept VIRTIO_F_ORDER_PLATFORM"); every other transport bit (indirect
// descriptors, packed rings, in-order, ring reset, ...) must be off.
func svqTransport(f virtio.Features) (virtio.Features, bool) {
	ok := f
	for b := uint(transportStart); b <= transportEnd; b++ {
		switch x := virtio.Bit(b); x {
		case virtio.EventIdx, virtio.OrderPlatform:
		case virtio.Version1, virtio.AccessPlatform:
			ok |= x
		default:
			ok &^= x
		}
	}
	return ok, ok == f
}

const (
	backendIOTLBASID = 1 << 3 // VHOST_BACKEND_F_IOTLB_ASID
	backendSuspend   = 1 << 4 // VHOST_BACKEND_F_SUSPEND
)

// VDPAMigration decides whether QEMU version qemu ("7.2.22"; "" when the
// host has none) can live-migrate a VM whose NIC is the vdpa device with
// facts f, by the rules above. The answer for the newest rules (QEMU 8.2
// and later) is added when an older QEMU is the reason, so that a host
// about to get a newer QEMU knows what to expect.
func VDPAMigration(qemu string, f host.VDPAFacts) host.VDPAMigration {
	m := host.VDPAMigration{Facts: &f}
	backend, ok1 := host.Word(f.BackendFeatures)
	feats, ok2 := host.Word(f.Features)
	if !ok1 || !ok2 {
		m.Reason = fmt.Sprintf("unknown: the device's backend features %.32q or features %.32q do not parse", f.BackendFeatures, f.Features)
		return m
	}
	m.Suspend = backend&backendSuspend != 0
	devOK, devWhy := svqDevice(virtio.Features(feats), backend, f)
	newer := "QEMU 8.2 and later would migrate it (" + devWhy + ")"
	if !devOK {
		newer = "QEMU 8.2 and later would not either: " + devWhy
	}
	switch {
	case qemu == "":
		m.Reason = "no QEMU on this host to migrate with (netctl probe found no qemu-system-x86_64, or could not read its version); " + newer
	case !known(qemu):
		m.Reason = fmt.Sprintf("unknown: QEMU version %.32q does not parse; %s", qemu, newer)
	case !atLeast(qemu, "7.0"):
		m.Reason = fmt.Sprintf("QEMU %s has no shadow virtqueues, so it never migrates vhost-vdpa: %q; %s", qemu, qemuLogAllBlocker, newer)
	case !atLeast(qemu, "8.0"):
		m.Reason = fmt.Sprintf("QEMU %s migrates vhost-vdpa only with the experimental netdev option x-svq=on "+
			"(shadow virtqueues for the VM's whole life), which netctl does not set; without it QEMU blocks migration: %q; %s",
			qemu, qemuLogAllBlocker, newer)
	case !devOK:
		m.Reason = devWhy
	case virtio.Features(feats).Has(virtio.NetCtrlVQ) && !atLeast(qemu, "8.2"):
		m.Reason = fmt.Sprintf("QEMU %s blocks migration of every vdpa device with a control virtqueue: %q (lifted in QEMU 8.2)", qemu, qemuCVQBlocker)
	default:
		m.OK, m.Reason = true, devWhy
	}
	return m
}

// svqDevice is the device's side of the QEMU 8.2+ rules: whether shadow
// virtqueues can drive it, and why (or, when they can, what the downtime
// depends on).
func svqDevice(f virtio.Features, backend uint64, facts host.VDPAFacts) (bool, string) {
	if bad := svqNetInvalid(f); bad != 0 {
		return false, fmt.Sprintf("the device offers %s, which shadow virtqueues cannot carry: %q", bad, fmt.Sprintf(qemuNetSVQBlocker, uint64(bad)))
	}
	if ok, good := svqTransport(f); !good {
		return false, fmt.Sprintf("shadow virtqueues cannot drive the device's rings (%s): %q",
			svqTransportDiff(f, ok), fmt.Sprintf(qemuSVQBlocker, uint64(f), uint64(ok)))
	}
	var why []string
	if f.Has(virtio.NetCtrlVQ) {
		switch {
		case backend&backendIOTLBASID == 0:
			return false, "the device has a control virtqueue but does not offer VHOST_BACKEND_F_IOTLB_ASID, so QEMU cannot shadow it alone " +
				"and does not know what the guest set through it; QEMU: \"The migration will be blocked as long as vhost-vdpa backends will not offer _F_LOG\""
		case facts.CVQOwnGroup == nil:
			return false, "the device has a control virtqueue, but its virtqueue groups could not be read (" +
				firstNonEmpty(facts.GroupError, "not reported") + "), and QEMU shadows it only in a group of its own"
		case !*facts.CVQOwnGroup:
			return false, "the control virtqueue shares a virtqueue group with the data virtqueues (VHOST_VDPA_GET_VRING_GROUP), " +
				"so QEMU cannot give it an address space of its own; QEMU: \"The migration will be blocked as long as vhost-vdpa backends will not offer _F_LOG\""
		case facts.AddressSpaces != 0 && facts.AddressSpaces < 2:
			return false, fmt.Sprintf("the control virtqueue is in its own group, but the device has %d address space (VHOST_VDPA_GET_AS_NUM): "+
				"QEMU needs a second one for it (VHOST_VDPA_SET_GROUP_ASID to 1)", facts.AddressSpaces)
		}
		why = append(why, "control virtqueue in its own group")
	} else {
		why = append(why, "no control virtqueue, so no device state outside the rings")
	}
	why = append(why, "features within what shadow virtqueues carry")
	if backend&backendSuspend != 0 {
		why = append(why, "VHOST_BACKEND_F_SUSPEND: QEMU stops it without a reset")
	} else {
		why = append(why, "no VHOST_BACKEND_F_SUSPEND: QEMU resets the device to switch it to shadow virtqueues "+
			"and at the switchover, a longer downtime that drops what is in flight")
	}
	return true, strings.Join(why, "; ")
}

// svqTransportDiff names what svqTransport changed: the bits to turn off
// and the ones missing.
func svqTransportDiff(f, ok virtio.Features) string {
	var parts []string
	if off := f &^ ok; off != 0 {
		parts = append(parts, "offers "+off.String())
	}
	if on := ok &^ f; on != 0 {
		parts = append(parts, "lacks "+on.String())
	}
	return strings.Join(parts, ", ")
}

func known(v string) bool {
	_, ok := parseVersion(v)
	return ok
}

// atLeast is versionAtLeast for a version Validate already checked.
func atLeast(have, min string) bool {
	ok, _ := versionAtLeast(have, min)
	return ok
}

// noteVDPAMigration notes (in Notes and VDPAMigration) when the vdpa
// device Decide chose on host n cannot live-migrate with n's QEMU, as
// n's probe answered, or, on a host whose probe found no QEMU, with the
// version req assumes (netctl plan --qemu), from the device's facts.
func (res *PlanResult) noteVDPAMigration(n string, h *host.Description, d Decision, req Request) {
	if d.Backend != BackendVDPA {
		return
	}
	dev, ok := chosenVDPA(h)
	if !ok {
		return
	}
	m := dev.Migration
	if m != nil && m.Facts != nil && h.QEMU.Version == "" && req.QEMU != "" {
		assumed := VDPAMigration(req.QEMU, *m.Facts)
		m = &assumed
	}
	var why string
	switch {
	case m == nil:
		why = "vdpa device " + dev.Name + ": whether QEMU can live-migrate it is not known (the probe did not say: run netctl probe -j with this netctl on " + n + ")"
	case m.OK:
		return
	default:
		why = "vdpa device " + dev.Name + " cannot live-migrate: " + m.Reason
	}
	if res.VDPAMigration == nil {
		res.VDPAMigration = map[string]string{}
	}
	res.VDPAMigration[n] = why
	res.Notes = append(res.Notes, n+": "+why)
}

// chosenVDPA is the device Decision.chain takes for the vDPA backend: the
// first one bound to vhost_vdpa whose features the probe read.
func chosenVDPA(h *host.Description) (host.VDPADevice, bool) {
	for _, dev := range h.VDPA.Devices {
		if _, ok := dev.FeatureWord(); ok && dev.Driver == "vhost_vdpa" {
			return dev, true
		}
	}
	return host.VDPADevice{}, false
}
