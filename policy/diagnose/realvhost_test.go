package diagnose

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/netctl/netctl/virtio"
)

// The nested guest of issue 11 on 6.12 and 6.1: a QEMU 7.2 in the test VM (run
// through chroot /host) with four vhost=on NICs on taps: nic0 defaults,
// nic1 guest_tso4=off,guest_tso6=off, nic2 mrg_rxbuf=off, nic3 on a tap
// with vnet_hdr=off. testdata/nested-KERNEL holds what netctl diagnose
// --save read from outside the chroot (nicN-snapshot.json), the L2
// guest's own device/features, and the taps' active ethtool features.
var nestedCmdline = map[string]map[string]string{ // the -device options (gather: TestDeviceOptionNested)
	"nic0": {}, "nic1": {"guest_tso4": "off", "guest_tso6": "off"}, "nic2": {"mrg_rxbuf": "off"}, "nic3": {},
}

// rxEthtool is the tap feature that a receive offload turns on.
var rxEthtool = map[string]string{"GUEST_CSUM": "tx-checksum-ip-generic", "GUEST_TSO4": "tx-tcp-segmentation",
	"GUEST_TSO6": "tx-tcp6-segmentation", "GUEST_ECN": "tx-tcp-ecn-segmentation"}

func TestExplainNestedVhost(t *testing.T) {
	for _, kernel := range []string{"6.12", "6.1"} {
		for _, withCmdline := range []bool{false, true} {
			for nic := range 4 {
				id := fmt.Sprintf("nic%d", nic)
				t.Run(fmt.Sprintf("%s/%s/cmdline=%v", kernel, id, withCmdline), func(t *testing.T) {
					testNested(t, kernel, id, withCmdline)
				})
			}
		}
		// What netctl diagnose --save wrote in the chroot, with the NIC
		// type's defaults and QEMU's command line as read there
		// (TestVMDiagnoseNested, nicN.json): nothing added by hand.
		for nic := range 4 {
			id := fmt.Sprintf("nic%d", nic)
			t.Run(fmt.Sprintf("%s/%s/saved", kernel, id), func(t *testing.T) {
				s, err := Decode(readFile(t, "testdata/nested-"+kernel+"/"+id+"-full-snapshot.json"))
				if err != nil {
					t.Fatal(err)
				}
				if s.Cmdline == nil || s.Defaults == nil || s.Driver != "virtio-net-pci" {
					t.Fatalf("the sample lacks the command line or the defaults: driver %q, cmdline %v, defaults %v", s.Driver, s.Cmdline, s.Defaults)
				}
				r, err := Explain(s)
				if err != nil {
					t.Fatal(err)
				}
				checkNested(t, kernel, id, r, true)
			})
		}
	}
}

func testNested(t *testing.T, kernel, id string, withCmdline bool) {
	s, err := Decode(readFile(t, "testdata/nested-"+kernel+"/"+id+"-snapshot.json"))
	if err != nil {
		t.Fatal(err)
	}
	if withCmdline {
		s.Driver, s.Defaults, s.Cmdline = "virtio-net-pci", defaults(t), nestedCmdline[id]
		delete(s.Defaults, "guest_uso4") // QEMU 7.2
		delete(s.Defaults, "guest_uso6")
		delete(s.Defaults, "host_uso")
	}
	r, err := Explain(s)
	if err != nil {
		t.Fatal(err)
	}
	checkNested(t, kernel, id, r, withCmdline)
}

func checkNested(t *testing.T, kernel, id string, r *Report, withCmdline bool) {
	t.Helper()
	_, bits, _ := strings.Cut(strings.TrimSpace(string(readFile(t, "testdata/nested-"+kernel+"/"+id+"-l2-features.txt"))), " ")
	if want := "0x" + strconv.FormatUint(uint64(sysfsWord(t, bits)), 16); r.Guest.Hex != want {
		t.Errorf("guest word %s, the L2 guest's driver says %s", r.Guest.Hex, want)
	}
	var tap struct {
		Active map[string]bool `json:"active"`
	}
	if err := json.Unmarshal(readFile(t, "testdata/nested-"+kernel+"/l2tap"+id[3:]+"-ethtool-active.json"), &tap); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(r.Backend, "tap l2tap"+id[3:]+", 1 queue(s), vhost=on: vhost-net moves the packets") {
		t.Errorf("backend %q", r.Backend)
	}
	rows := map[string]Row{}
	for _, x := range r.Features {
		rows[x.Feature] = x
		// Every receive offload's verdict is the tap's ethtool state.
		if f, ok := rxEthtool[x.Feature]; ok && (x.Verdict == "on") != tap.Active[f] {
			t.Errorf("%s %s, but the tap's %s is %v", x.Feature, x.Verdict, f, tap.Active[f])
		}
		// Every offload that is off names the layer that turned it off.
		if x.Verdict == "off" && isOffload(virtio.Bit(x.Bit)) && x.Layer == "" {
			t.Errorf("%s off without a layer: %q", x.Feature, x.Reason)
		}
	}
	// Every ring bit vhost-net was given shows backend yes.
	ring := []string{"EVENT_IDX", "INDIRECT_DESC", "VERSION_1"}
	if id != "nic2" {
		ring = append(ring, "MRG_RXBUF")
	}
	if kernel == "6.12" {
		ring = append(ring, "RING_RESET")
	}
	for _, f := range ring {
		if x := rows[f]; x.Verdict != "on" || x.Backend != "yes" {
			t.Errorf("%s: %+v, want on and carried by vhost-net", f, x)
		}
	}
	want := map[string][2]string{}
	if kernel == "6.1" {
		// vhost-net on 6.1 has no RING_RESET: QEMU drops it and writes
		// that back into queue_reset, which reads false.
		want["RING_RESET"] = [2]string{"vhost-net", "vhost-net on 6.1 does not offer it, so QEMU does not either (QEMU writes that back: the NIC's property queue_reset reads off)"}
		want["GUEST_USO6"] = [2]string{"qemu", "QEMU 7.2.22 has no guest_uso6 property: USO needs QEMU 8.2, and tun on 6.1 refuses TUN_F_USO6;"}
		want["HOST_USO"] = [2]string{"qemu", "QEMU 7.2.22 has no host_uso property: USO needs QEMU 8.2, and tun on 6.1 takes no USO frames from the guest"}
		if x := rowOf(r, "HOST_USO"); strings.Contains(x.Reason, "TUN_F_USO4") {
			t.Errorf("HOST_USO names GUEST_USO4's flag: %q", x.Reason)
		}
	}
	switch id {
	case "nic1":
		want["GUEST_ECN"] = [2]string{"dependency", "needs GUEST_TSO4 or GUEST_TSO6, both off (property guest_tso4=off, guest_tso6=off)"}
		want["GUEST_TSO4"] = [2]string{"property", "the NIC's property guest_tso4 is off"}
		if withCmdline {
			want["GUEST_ECN"] = [2]string{"dependency", "needs GUEST_TSO4 or GUEST_TSO6, both off (set off on the command line: guest_tso4=off, guest_tso6=off)"}
			want["GUEST_TSO4"] = [2]string{"cmdline", "set off on QEMU's command line (-device virtio-net-pci,...,guest_tso4=off)"}
		}
	case "nic2":
		want["MRG_RXBUF"] = [2]string{"property", "the NIC's property mrg_rxbuf is off"}
		if withCmdline {
			want["MRG_RXBUF"] = [2]string{"cmdline", "set off on QEMU's command line (-device virtio-net-pci,...,mrg_rxbuf=off)"}
		}
	case "nic3":
		want["GUEST_TSO4"] = [2]string{"tap", "the tap has no virtio-net header (vnet_hdr=off), so QEMU offers no offloads; vhost-net adds the guest's header itself"}
		if !strings.HasPrefix(r.Header, "none on the tap (vnet_hdr=off): vhost-net acknowledged VHOST_NET_F_VIRTIO_NET_HDR") {
			t.Errorf("header %q", r.Header)
		}
	}
	if id != "nic3" && r.Header != "12 bytes, as the negotiated features need" {
		t.Errorf("header %q", r.Header)
	}
	for f, w := range want {
		if x := rows[f]; x.Verdict != "off" || x.Layer != w[0] || !strings.HasPrefix(x.Reason, w[1]) {
			t.Errorf("%s: %+v, want layer %s, reason %q...", f, x, w[0], w[1])
		}
	}
}

// TestExplainNestedBareReply: the vnet_hdr=off NIC's bare
// x-query-virtio-status reply, as virsh would save it, without the tap:
// QMP alone says vhost-net carries it and adds the header; on 6.1 the
// RING_RESET row blames vhost-net.
func TestExplainNestedBareReply(t *testing.T) {
	for _, kernel := range []string{"6.12", "6.1"} {
		testNestedBare(t, kernel)
	}
}

func testNestedBare(t *testing.T, kernel string) {
	s, err := Decode(readFile(t, "testdata/nested-"+kernel+"/qmp-x-query-virtio-status-nic3.json"))
	if err != nil {
		t.Fatal(err)
	}
	ringReset := false
	r, err := Explain(s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(r.Backend, "vhost=on: vhost-net moves the packets") ||
		!strings.HasPrefix(r.Header, "none on the tap (vnet_hdr=off): vhost-net acknowledged VHOST_NET_F_VIRTIO_NET_HDR") {
		t.Errorf("backend %q, header %q", r.Backend, r.Header)
	}
	for _, x := range r.Features {
		if (x.Feature == "MRG_RXBUF" || x.Feature == "RING_RESET" && kernel == "6.12") && x.Backend != "yes" {
			t.Errorf("%s: %+v", kernel, x)
		}
		if x.Feature == "RING_RESET" {
			ringReset = true
			if kernel == "6.1" && (x.Layer != "vhost-net" || x.Reason != "the host's vhost-net does not offer it, so QEMU does not either") {
				t.Errorf("6.1: %+v", x)
			}
		}
		if x.Feature == "GUEST_CSUM" && (x.Layer != "tap" || !strings.Contains(x.Reason, "vnet_hdr=off")) {
			t.Errorf("%s: %+v", kernel, x)
		}
	}
	if !ringReset {
		t.Errorf("%s: no RING_RESET row", kernel)
	}
}

// TestExplainNestedTapUnread: the same NICs read by the netctl before
// issue 11 from outside the chroot, where QEMU's taps read as
// /host/dev/net/tun and were not found (the snapshot's note says so).
// What QMP says about vhost stands on its own: vhost-net carries the NIC
// and the ring bits it was given show backend yes.
func TestExplainNestedTapUnread(t *testing.T) {
	for _, kernel := range []string{"6.12", "6.1"} {
		for nic := range 4 {
			testNestedTapUnread(t, kernel, fmt.Sprintf("nic%d", nic))
		}
	}
}

func testNestedTapUnread(t *testing.T, kernel, id string) {
	s, err := Decode(readFile(t, "testdata/nested-"+kernel+"/"+id+"-tap-unread-snapshot.json"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Tap != nil || len(s.Errors) != 1 {
		t.Fatalf("%s: the sample read the tap after all: %+v %v", id, s.Tap, s.Errors)
	}
	r, err := Explain(s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(r.Backend, "vhost=on: vhost-net moves the packets") || strings.Contains(r.Backend, "reads no backend state") {
		t.Errorf("%s: backend %q", id, r.Backend)
	}
	for _, x := range r.Features {
		switch x.Feature {
		case "EVENT_IDX", "INDIRECT_DESC", "VERSION_1":
			if x.Backend != "yes" {
				t.Errorf("%s %s: %+v", kernel, id, x)
			}
		case "RING_RESET":
			if kernel == "6.12" && x.Backend != "yes" || kernel == "6.1" && x.Layer != "vhost-net" {
				t.Errorf("%s %s: %+v", kernel, id, x)
			}
		case "GUEST_TSO6":
			if x.Verdict == "on" && (x.Backend != "?" || !strings.Contains(x.Reason, "the tap was not read")) {
				t.Errorf("%s: %+v", id, x)
			}
		}
	}
}

func rowOf(r *Report, name string) Row {
	for _, x := range r.Features {
		if x.Feature == name {
			return x
		}
	}
	return Row{}
}
