package diagnose

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/virtio"
)

// vhostNet61 and vhostNet612 are what the kernels' vhost-net offer
// (VHOST_GET_FEATURES, as netctl probe read them in the test VMs:
// testdata/probe-6.1.json, probe-6.12.json): 6.1 has no RING_RESET.
const (
	vhostNet61  = virtio.NetMrgRxbuf | virtio.NotifyOnEmpty | virtio.LogAll | virtio.AnyLayout | virtio.IndirectDesc | virtio.EventIdx | virtio.Version1 | virtio.AccessPlatform
	vhostNet612 = vhostNet61 | virtio.RingReset
)

// qmpNames spells f as QEMU 7.2 prints a vhost-dev word: short transport
// names ("EVENT_IDX", "ANY_LAYOUT"), VIRTIO_NET_F_ device names, and
// VHOST_F_LOG_ALL; RING_RESET has no name there, so it is an unknown bit.
func qmpNames(f virtio.Features) map[string]any {
	var tr, dev []string
	var unknown uint64
	for _, b := range f.Bits() {
		switch x := virtio.Bit(b); x {
		case virtio.LogAll:
			dev = append(dev, "VHOST_F_LOG_ALL")
		case virtio.NetMrgRxbuf:
			dev = append(dev, "VIRTIO_NET_F_MRG_RXBUF")
		case virtio.AccessPlatform:
			tr = append(tr, "IOMMU_PLATFORM")
		case virtio.RingReset:
			unknown |= uint64(x)
		default:
			tr = append(tr, virtio.BitName(b))
		}
	}
	return map[string]any{"transports": tr, "dev-features": dev, "unknown-dev-features": unknown}
}

// withVhost adds what QMP reports for a vhost=on NIC: vhost-started and
// vhost-dev with vhost-net's offer and what QEMU acknowledged to it.
func withVhost(t testing.TB, st json.RawMessage, offer, acked virtio.Features) json.RawMessage {
	var m map[string]any
	if err := json.Unmarshal(st, &m); err != nil {
		t.Fatal(err)
	}
	m["vhost-started"] = true
	m["vhost-dev"] = map[string]any{"nvqs": 2, "vq-index": 0, "features": qmpNames(offer), "acked-features": qmpNames(acked),
		"backend-features": qmpNames(0)}
	b, _ := json.Marshal(m)
	return b
}

// defaults are virtio-net-pci's feature property defaults as QEMU 7.2
// reports them (device-list-properties, testdata), plus the USO ones
// QEMU 8.2 added (default on).
func defaults(t testing.TB) map[string]bool {
	var r struct {
		Return []struct {
			Name    string          `json:"name"`
			Type    string          `json:"type"`
			Default json.RawMessage `json:"default-value"`
		}
	}
	if err := json.Unmarshal(readFile(t, "testdata/device-list-properties-virtio-net-pci-qemu-7.2.json"), &r); err != nil {
		t.Fatal(err)
	}
	d := map[string]bool{"guest_uso4": true, "guest_uso6": true, "host_uso": true}
	for _, p := range r.Return {
		if p.Type == "bool" && contains(Props(), p.Name) {
			d[p.Name] = string(p.Default) == "true"
		}
	}
	if !d["queue_reset"] || d["mq"] || len(d) < 30 {
		t.Fatalf("defaults %v", d)
	}
	return d
}

// TestExplainVhostRefusedRingReset models QEMU on a 6.1 host with
// vhost=on and the same command line as on 6.12: vhost-net offers no
// RING_RESET, QEMU drops bit 40 from its offer and writes that back into
// the queue_reset property, which then reads false (issue 11, defect 1).
func TestExplainVhostRefusedRingReset(t *testing.T) {
	offer := linuxGuest | virtio.IndirectDesc // RING_RESET dropped
	snap := func() *Snapshot {
		s := tapSnapshot(t, offer, offer, "6.1", "csum", "tso4", "tso6", "tso_ecn")
		s.Status = withVhost(t, s.Status, vhostNet61, (offer&vhostKernelBits)&vhostNet61)
		s.Props["queue_reset"] = false // QEMU's read-back, not the user
		s.Driver, s.Defaults, s.Cmdline = "virtio-net-pci", defaults(t), map[string]string{}
		return s
	}
	for _, c := range []struct {
		name         string
		edit         func(*Snapshot)
		layer, would string
	}{
		{"defaults and command line read", func(*Snapshot) {}, "vhost-net",
			"vhost-net on 6.1 does not offer it, so QEMU does not either (QEMU writes that back: the NIC's property queue_reset reads off)"},
		{"no defaults, no command line", func(s *Snapshot) { s.Defaults, s.Cmdline, s.Driver = nil, nil, "" }, "vhost-net",
			"vhost-net on 6.1 does not offer it, so QEMU does not either (QEMU writes that back: the NIC's property queue_reset reads off)"},
		{"no properties either (a bare reply with the tap)", func(s *Snapshot) { s.Defaults, s.Cmdline, s.Props = nil, nil, nil }, "vhost-net",
			"vhost-net on 6.1 does not offer it, so QEMU does not either"},
		{"the user set it off too", func(s *Snapshot) { s.Cmdline["queue_reset"] = "off" }, "cmdline",
			"set off on QEMU's command line (-device virtio-net-pci,...,queue_reset=off)"},
		{"vhost=off: the property is the cause", func(s *Snapshot) {
			var m map[string]any
			json.Unmarshal(s.Status, &m)
			delete(m, "vhost-dev")
			m["vhost-started"] = false
			s.Status, _ = json.Marshal(m)
		}, "property", "the NIC's property queue_reset is off although virtio-net-pci defaults to on and the command line does not set it: " +
			"the machine type's compat settings or a -global turn it off"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := snap()
			c.edit(s)
			r, err := Explain(s)
			if err != nil {
				t.Fatal(err)
			}
			got := row(t, r, "RING_RESET")
			if got.Verdict != "off" || got.Offered || got.Layer != c.layer || got.Reason != c.would {
				t.Errorf("RING_RESET: %+v\nwant layer %q, reason %q", got, c.layer, c.would)
			}
		})
	}

	// On 6.12 the same command line gets RING_RESET: on, carried by vhost-net.
	s := tapSnapshot(t, offer|virtio.RingReset, offer|virtio.RingReset, "6.12", "csum", "tso4", "tso6", "tso_ecn")
	s.Status = withVhost(t, s.Status, vhostNet612, ((offer|virtio.RingReset)&vhostKernelBits)&vhostNet612)
	r, _ := Explain(s)
	if got := row(t, r, "RING_RESET"); got.Verdict != "on" || got.Backend != "yes" {
		t.Errorf("6.12 RING_RESET: %+v", got)
	}
}

// TestExplainDefaultOffered: every bit the device type offers by default
// but that ended up not offered has a row naming the layer that dropped it.
func TestExplainDefaultOffered(t *testing.T) {
	offer := (linuxGuest | virtio.IndirectDesc | virtio.RingReset) &^ virtio.EventIdx
	s := tapSnapshot(t, offer, offer, "6.12", "csum", "tso4", "tso6", "tso_ecn")
	s.Status = withVhost(t, s.Status, vhostNet612&^virtio.EventIdx, offer&vhostKernelBits)
	s.Driver, s.Defaults = "virtio-net-pci", defaults(t)
	s.Cmdline = map[string]string{"ctrl_rx_extra": "off", "guest_announce": "false"}
	s.Props["ctrl_rx_extra"], s.Props["guest_announce"], s.Props["ctrl_vlan"], s.Props["mq"] = false, false, false, false
	r, err := Explain(s)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][2]string{
		"CTRL_RX_EXTRA":  {"cmdline", "set off on QEMU's command line (-device virtio-net-pci,...,ctrl_rx_extra=off)"},
		"GUEST_ANNOUNCE": {"cmdline", "set off on QEMU's command line (-device virtio-net-pci,...,guest_announce=false)"},
		"CTRL_VLAN":      {"property", "the NIC's property ctrl_vlan is off although virtio-net-pci defaults to on"},
		"EVENT_IDX":      {"vhost-net", "vhost-net on 6.12 does not offer it, so QEMU does not either"},
	} {
		got := row(t, r, name)
		if got.Verdict != "off" || got.Layer != want[0] || !strings.HasPrefix(got.Reason, want[1]) {
			t.Errorf("%s: %+v, want layer %s, reason %q...", name, got, want[0], want[1])
		}
	}
	if got := row(t, r, "MQ"); got.Layer != "property" || got.Reason != "the NIC's property mq is off, its default (-device virtio-net-pci,...,mq=on turns it on)" {
		t.Errorf("MQ: %+v", got)
	}
	// Bits off by default and not offered get no row of their own.
	for _, x := range r.Features {
		if x.Feature == "RSS" || x.Feature == "RING_PACKED" {
			t.Errorf("row for a bit off by default: %+v", x)
		}
	}
}

// TestExplainVhostFromQMPAlone: with a bare x-query-virtio-status reply
// (libvirt) and no tap, QMP's vhost-started and vhost-dev say that
// vhost-net carries the NIC, and the ring bits are attributed to it
// (issue 11, defect 2).
func TestExplainVhostFromQMPAlone(t *testing.T) {
	offer := linuxGuest | virtio.IndirectDesc
	s, err := Decode(withVhost(t, status(offer, offer, "ACKNOWLEDGE", "DRIVER", "FEATURES_OK", "DRIVER_OK"), vhostNet61, offer&vhostKernelBits&vhostNet61))
	if err != nil {
		t.Fatal(err)
	}
	s.Host = loadProbe(t, "6.1")
	r, err := Explain(s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(r.Backend, "vhost=on: vhost-net moves the packets") || strings.Contains(r.Backend, "unknown") {
		t.Errorf("backend %q", r.Backend)
	}
	if got := row(t, r, "MRG_RXBUF"); got.Verdict != "on" || got.Backend != "yes" {
		t.Errorf("MRG_RXBUF: %+v", got)
	}
	if got := row(t, r, "RING_RESET"); got.Layer != "vhost-net" || got.Reason != "vhost-net on 6.1 does not offer it, so QEMU does not either" {
		t.Errorf("RING_RESET: %+v", got)
	}
	if got := row(t, r, "GUEST_TSO4"); got.Verdict != "on" || got.Backend != "?" || !strings.Contains(got.Reason, "vhost-net carries it only if the tap's tso4 offload is on") {
		t.Errorf("GUEST_TSO4: %+v", got)
	}
	if !strings.HasPrefix(r.Header, "on the tap: vhost-net did not acknowledge VHOST_NET_F_VIRTIO_NET_HDR") {
		t.Errorf("header %q", r.Header)
	}

	// vhost-started alone (a reply without vhost-dev, as a trimmed or
	// hand-made one can be): still vhost=on, not "unknown".
	var m map[string]any
	json.Unmarshal(status(offer, offer, "DRIVER_OK"), &m)
	m["vhost-started"] = true
	b, _ := json.Marshal(m)
	s, _ = Decode(b)
	if r, _ := Explain(s); !strings.HasPrefix(r.Backend, "vhost=on: a vhost backend moves the packets (QMP: vhost-started") || strings.Contains(r.Backend, "unknown") {
		t.Errorf("vhost-started without vhost-dev: backend %q", r.Backend)
	}

	// A vhost-vdpa or vhost-user device offers the offloads itself: not
	// taken for vhost-net.
	s, _ = Decode(withVhost(t, status(offer, offer, "DRIVER_OK"), offer, offer))
	if r, _ := Explain(s); strings.Contains(r.Backend, "vhost-net") || !strings.HasPrefix(r.Backend, "vhost=on: a vhost-user or vhost-vdpa device") {
		t.Errorf("a vhost device that offers offloads: backend %q, want vhost=on, not taken for vhost-net", r.Backend)
	}
}

// TestExplainVnetHdrOffWithVhost: with vnet_hdr=off and vhost=on, QEMU
// asks vhost-net for VHOST_NET_F_VIRTIO_NET_HDR (QMP prints bit 27 as
// ANY_LAYOUT in vhost-dev acked-features), and vhost-net adds the
// guest's header itself (issue 11, defect 4).
func TestExplainVnetHdrOffWithVhost(t *testing.T) {
	const offloads = virtio.NetCsum | virtio.NetGuestCsum | virtio.NetGuestTSO4 | virtio.NetGuestTSO6 | virtio.NetGuestECN |
		virtio.NetHostTSO4 | virtio.NetHostTSO6 | virtio.NetHostECN | virtio.NetCtrlGuestOffloads
	offer := (linuxGuest | virtio.IndirectDesc | virtio.RingReset) &^ offloads
	acked := offer&vhostKernelBits&vhostNet612 | virtio.AnyLayout
	for _, bare := range []bool{false, true} {
		s := tapSnapshot(t, offer, offer, "6.12")
		s.Tap.VnetHdr, s.Tap.HdrLen = false, 0
		s.Status = withVhost(t, s.Status, vhostNet612, acked)
		if bare {
			s.Tap, s.Netdev, s.Props = nil, Netdev{}, nil
		}
		r, err := Explain(s)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(r.Header, "none on the tap (vnet_hdr=off): vhost-net acknowledged VHOST_NET_F_VIRTIO_NET_HDR (QMP prints it as ANY_LAYOUT") ||
			!strings.Contains(r.Header, "adds and strips the guest's 12-byte header itself") {
			t.Errorf("bare %v: header %q", bare, r.Header)
		}
		if got := row(t, r, "GUEST_TSO4"); got.Layer != "tap" || !strings.HasPrefix(got.Reason, "the tap has no virtio-net header (vnet_hdr=off), so QEMU offers no offloads; vhost-net adds") {
			t.Errorf("bare %v: GUEST_TSO4 %+v", bare, got)
		}
	}
}

// TestExplainDependencyChains: an offered bit whose prerequisites (the
// spec's table, policy.Requirements) are all off is off for that reason,
// with the first cause named (issue 11, defect 3), for every requirement.
func TestExplainDependencyChains(t *testing.T) {
	base := virtio.Version1 | virtio.NetMrgRxbuf
	for _, req := range policy.Requirements {
		name := virtio.BitName(req.F.Bits()[0])
		t.Run(name, func(t *testing.T) {
			s := tapSnapshot(t, base|req.F, base|req.F, "6.12", "csum", "tso4", "tso6", "tso_ecn", "uso4", "uso6")
			var props []string
			for _, b := range req.AnyOf.Bits() {
				p := propOf(virtio.Bit(b))
				if p == "" {
					continue
				}
				s.Props[p] = false
				props = append(props, p+"=off")
			}
			r, err := Explain(s)
			if err != nil {
				t.Fatal(err)
			}
			got := row(t, r, name)
			want := "needs " + strings.Join(req.AnyOf.Names(), " or ")
			if got.Verdict != "off" || got.Layer != "dependency" || !strings.HasPrefix(got.Reason, want) {
				t.Fatalf("%+v, want off, dependency, %q...", got, want)
			}
			if len(props) == len(req.AnyOf.Bits()) && !strings.HasSuffix(got.Reason, "(property "+strings.Join(props, ", ")+")") {
				t.Errorf("reason %q does not name the properties %v", got.Reason, props)
			}
			for _, b := range req.AnyOf.Bits() {
				row(t, r, virtio.BitName(b)) // the cause has a row of its own
			}
			if isOffload(req.F) && !contains(r.Off, got.Line()) {
				t.Errorf("%s not in Off %v", got.Line(), r.Off)
			}
		})
	}

	// The case: GUEST_ECN acknowledged, TSO off by property.
	s := tapSnapshot(t, linuxGuest&^(virtio.NetGuestTSO4|virtio.NetGuestTSO6), linuxGuest&^(virtio.NetGuestTSO4|virtio.NetGuestTSO6), "6.12", "csum")
	s.Props["guest_tso4"], s.Props["guest_tso6"] = false, false
	r, _ := Explain(s)
	if got := row(t, r, "GUEST_ECN"); got.Line() != "GUEST_ECN off: needs GUEST_TSO4 or GUEST_TSO6, both off (property guest_tso4=off, guest_tso6=off)" || got.Backend != "no" {
		t.Errorf("GUEST_ECN: %q %+v", got.Line(), got)
	}
	// The same set off on the command line (the nested guest's "guest TSO
	// off" NIC): QEMU sets TUN_F_TSO_ECN only with TSO4 or TSO6.
	s.Cmdline = map[string]string{"guest_tso4": "off", "guest_tso6": "false"}
	r, _ = Explain(s)
	if got := row(t, r, "GUEST_ECN"); got.Line() != "GUEST_ECN off: needs GUEST_TSO4 or GUEST_TSO6, both off (set off on the command line: guest_tso4=off, guest_tso6=false)" {
		t.Errorf("GUEST_ECN: %q", got.Line())
	}
	// Different causes are named one by one.
	s.Cmdline = map[string]string{"guest_tso4": "off"}
	r, _ = Explain(s)
	if got := row(t, r, "GUEST_ECN"); got.Reason != "needs GUEST_TSO4 or GUEST_TSO6, both off (GUEST_TSO4: set off on the command line: guest_tso4=off; GUEST_TSO6: property guest_tso6=off)" {
		t.Errorf("GUEST_ECN: %q", got.Reason)
	}
	// A chain: GUEST_CSUM off takes TSO and then ECN with it.
	s = tapSnapshot(t, linuxGuest&^virtio.NetGuestCsum, linuxGuest&^virtio.NetGuestCsum, "6.12")
	s.Props["guest_csum"] = false
	r, _ = Explain(s)
	if got := row(t, r, "GUEST_TSO4"); got.Reason != "needs GUEST_CSUM, off (property guest_csum=off)" {
		t.Errorf("GUEST_TSO4: %q", got.Reason)
	}
	if got := row(t, r, "GUEST_ECN"); got.Reason != "needs GUEST_TSO4 or GUEST_TSO6, both off (both need GUEST_CSUM, off (property guest_csum=off))" {
		t.Errorf("GUEST_ECN: %q", got.Reason)
	}
	// HOST_* when CSUM is off: the guest does not segment without checksum offload.
	s = tapSnapshot(t, linuxGuest&^virtio.NetCsum, linuxGuest&^virtio.NetCsum, "6.12", "csum", "tso4", "tso6", "tso_ecn")
	s.Props["csum"] = false
	r, _ = Explain(s)
	for _, n := range []string{"HOST_TSO4", "HOST_TSO6"} {
		if got := row(t, r, n); got.Verdict != "off" || got.Reason != "needs CSUM, off (property csum=off)" {
			t.Errorf("%s: %+v", n, got)
		}
	}
	if got := row(t, r, "HOST_ECN"); got.Reason != "needs HOST_TSO4 or HOST_TSO6, both off (both need CSUM, off (property csum=off))" {
		t.Errorf("HOST_ECN: %q", got.Reason)
	}
}

// TestExplainVhostAcked: the ring bits QEMU acknowledged to vhost-net
// (vhost-dev acked-features) show backend "yes", and one the guest took
// but vhost-net was not given shows "no".
func TestExplainVhostAcked(t *testing.T) {
	offer := linuxGuest | virtio.IndirectDesc | virtio.RingReset
	s := tapSnapshot(t, offer, offer, "6.12", "csum", "tso4", "tso6", "tso_ecn")
	s.Status = withVhost(t, s.Status, vhostNet612, offer&vhostKernelBits&vhostNet612&^virtio.IndirectDesc)
	r, err := Explain(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"MRG_RXBUF", "EVENT_IDX", "VERSION_1", "RING_RESET"} {
		if got := row(t, r, n); got.Verdict != "on" || got.Backend != "yes" {
			t.Errorf("%s: %+v", n, got)
		}
	}
	if got := row(t, r, "INDIRECT_DESC"); got.Backend != "no" || !strings.Contains(got.Reason, "did not acknowledge it to vhost-net") {
		t.Errorf("INDIRECT_DESC: %+v", got)
	}
}
