package diagnose

import (
	"strings"
	"testing"
)

// TestLibvirtReportTable: the libvirt-only report names each interface
// from the live XML with its host tap, lists what only QEMU's monitor
// knows (and how to get it, with its price) and, after --qemu-monitor,
// says the domain is tainted; control characters from the XML are
// neutralised.
func TestLibvirtReportTable(t *testing.T) {
	r := &LibvirtReport{URI: "qemu:///system", Domain: "lv\x1b[2J", UUID: "u",
		NICs: []LibvirtNIC{{Alias: "net1", MAC: "52:54:00:79:00:02", Model: "virtio", Type: "ethernet", Target: "lvst0", Driver: "qemu", Queues: 2,
			Runs: "ethernet lvst0 (net1): driver qemu (QEMU's own virtio-net, no vhost), 2 queue(s)",
			Tap:  &TapState{Name: "lvst0", Queues: 2, VnetHdr: true, Offloads: []string{"csum", "tso4"}}}},
		NeedsMonitor: NeedsMonitor}
	var b strings.Builder
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"libvirt domain lv?[2J (u)", "net1: ethernet lvst0 (net1): driver qemu", "host tap lvst0: vnet_hdr yes, 2 queue(s) attached, offloads on it: csum tso4",
		"--qemu-monitor asks QEMU through libvirt", "guest's driver acknowledged"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "tainted: custom-monitor:") || strings.Contains(out, "\x1b") {
		t.Errorf("untainted report says tainted, or carries an escape:\n%s", out)
	}
	r.NeedsMonitor, r.Tainted = nil, true
	b.Reset()
	r.WriteTable(&b)
	if !strings.Contains(b.String(), "tainted: custom-monitor: QEMU was asked through libvirt") || strings.Contains(b.String(), "Not read") {
		t.Errorf("tainted report:\n%s", b.String())
	}
}
