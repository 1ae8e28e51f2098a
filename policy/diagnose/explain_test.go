package diagnose

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/virtio"
)

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// loadProbe is the real netctl probe --json of a VM on kernel.
func loadProbe(t testing.TB, kernel string) json.RawMessage {
	return readFile(t, "../testdata/probe-"+kernel+".json")
}

// qemu72Props are the NIC properties QEMU 7.2 has: no USO.
func qemu72Props() map[string]bool {
	p := map[string]bool{}
	for _, n := range Props() {
		if !strings.Contains(n, "uso") {
			p[n] = true
		}
	}
	p["gso"], p["hash"], p["rss"], p["packed"], p["iommu_platform"] = true, false, false, false, false
	return p
}

// real72 is a snapshot around the status a real QEMU 7.2 reported for a
// 6.12 guest on a tap (testdata), with the host as given.
func real72(t testing.TB, host string) *Snapshot {
	return &Snapshot{Format: Format, QEMU: "7.2.22", NIC: "nic0", Path: "/machine/peripheral/nic0/virtio-backend",
		Status: readFile(t, "testdata/qemu-7.2-status.json"), Props: qemu72Props(),
		Netdev: Netdev{ID: "n0", Type: "tap", Options: map[string]string{"ifname": "nctl0"}},
		Tap:    &TapState{Name: "nctl0", Queues: 1, VnetHdr: true, HdrLen: 12, Offloads: []string{"csum", "tso4", "tso6", "tso_ecn"}},
		Host:   loadProbe(t, host)}
}

// sysfsWord reads the guest's /sys/class/net/eth0/device/features string.
func sysfsWord(t testing.TB, s string) virtio.Features {
	var f virtio.Features
	for i, c := range strings.TrimSpace(s) {
		if c == '1' {
			f |= virtio.Bit(uint(i))
		}
	}
	return f
}

func row(t *testing.T, r *Report, name string) Row {
	t.Helper()
	for _, x := range r.Features {
		if x.Feature == name {
			return x
		}
	}
	t.Fatalf("no row %s in %+v", name, r.Features)
	return Row{}
}

func TestExplainRealQEMU72(t *testing.T) {
	r, err := Explain(real72(t, "6.1"))
	if err != nil {
		t.Fatal(err)
	}
	guest := sysfsWord(t, string(readFile(t, "testdata/guest-6.12-features.txt")))
	if r.Guest.Hex != "0x"+strconv.FormatUint(uint64(guest), 16) {
		t.Errorf("guest features %s (%v), the guest's own driver says %#x (%v)", r.Guest.Hex, r.Guest.Names, uint64(guest), guest)
	}
	if strings.Join(r.Status, " ") != "ACKNOWLEDGE DRIVER FEATURES_OK DRIVER_OK" {
		t.Errorf("status %v", r.Status)
	}
	for name, want := range map[string]string{
		"GUEST_TSO4": "on: the tap's tso4 offload is on",
		"HOST_TSO6":  "on: the tap takes the guest's frames",
		"GUEST_UFO":  "on: tun takes TUN_F_UFO",
		"GUEST_USO4": "off: QEMU 7.2.22 has no guest_uso4 property: USO needs QEMU 8.2, and tun on 6.1 refuses TUN_F_USO4; UDP segmentation offload needs Linux 6.2",
		"GUEST_USO6": "off: QEMU 7.2.22 has no guest_uso6 property: USO needs QEMU 8.2, and tun on 6.1 refuses TUN_F_USO6; UDP segmentation offload needs Linux 6.2",
		"HOST_USO": "off: QEMU 7.2.22 has no host_uso property: USO needs QEMU 8.2, and tun on 6.1 takes no USO frames from the guest " +
			"(a virtio-net header with gso_type UDP_L4 gives EINVAL), and QEMU offers HOST_USO only where tun takes the USO offloads; UDP segmentation offload needs Linux 6.2",
		"GSO":        "off: a legacy bit",
		"VERSION_1":  "on: negotiated",
		"RING_RESET": "on: negotiated",
	} {
		if got := row(t, r, name); !strings.HasPrefix(got.Verdict+": "+got.Reason, want) {
			t.Errorf("%s: %q, want %q...", name, got.Verdict+": "+got.Reason, want)
		}
	}
	if !strings.Contains(r.Header, "12 bytes, as the negotiated features need") {
		t.Errorf("header: %q", r.Header)
	}
	// Every offload that is off is in Off with its reason.
	for _, x := range r.Features {
		if x.Verdict == "off" && isOffload(virtio.Bit(x.Bit)) && !contains(r.Off, x.Line()) {
			t.Errorf("%s is off but not in Off %v", x.Feature, r.Off)
		}
		if x.Reason == "" {
			t.Errorf("%s has no reason", x.Feature)
		}
	}
	var sb strings.Builder
	if err := r.WriteTable(&sb); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^GUEST_USO4 +54 +no +no +- +- +off +QEMU 7.2.22 has no guest_uso4`).MatchString(sb.String()) || !strings.Contains(sb.String(), "offloads off:") {
		t.Errorf("table:\n%s", sb.String())
	}
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// status builds an x-query-virtio-status reply with the words as QEMU's
// unknown bits (names are tested on the real reply).
func status(host, guest virtio.Features, statuses ...string) json.RawMessage {
	var st []string
	for _, s := range statuses {
		st = append(st, "VIRTIO_CONFIG_S_"+s+": x")
	}
	b, _ := json.Marshal(map[string]any{"name": "virtio-net", "device-id": 1,
		"host-features":  map[string]any{"transports": []string{}, "dev-features": []string{}, "unknown-dev-features": uint64(host)},
		"guest-features": map[string]any{"transports": []string{}, "dev-features": []string{}, "unknown-dev-features": uint64(guest)},
		"status":         map[string]any{"statuses": st}})
	return b
}

const linuxGuest = virtio.NetCsum | virtio.NetGuestCsum | virtio.NetGuestTSO4 | virtio.NetGuestTSO6 | virtio.NetGuestECN |
	virtio.NetHostTSO4 | virtio.NetHostTSO6 | virtio.NetHostECN | virtio.NetMrgRxbuf | virtio.NetCtrlVQ |
	virtio.NetCtrlGuestOffloads | virtio.Version1 | virtio.EventIdx

func tapSnapshot(t testing.TB, host, guest virtio.Features, kernel string, offs ...string) *Snapshot {
	props := qemu72Props()
	for _, p := range []string{"guest_uso4", "guest_uso6", "host_uso"} { // QEMU 8.2+
		props[p] = true
	}
	return &Snapshot{Format: Format, QEMU: "9.2.0", NIC: "net0", Status: status(host, guest, "ACKNOWLEDGE", "DRIVER", "FEATURES_OK", "DRIVER_OK"),
		Props: props, Netdev: Netdev{ID: "hostnet0", Type: "tap"},
		Tap: &TapState{Name: "vnet0", Queues: 1, VnetHdr: true, HdrLen: 12, Offloads: offs}, Host: loadProbe(t, kernel)}
}

func TestExplainReasons(t *testing.T) {
	all := linuxGuest | virtio.NetGuestUSO4 | virtio.NetGuestUSO6 | virtio.NetHostUSO
	for _, c := range []struct {
		name    string
		snap    *Snapshot
		feature string
		want    string // prefix of "verdict: reason"
	}{
		{"USO on a 6.1 host with QEMU 9.2", tapSnapshot(t, linuxGuest, linuxGuest, "6.1", "csum", "tso4", "tso6", "tso_ecn"),
			"GUEST_USO4", "off: tun on 6.1 refuses TUN_F_USO4; UDP segmentation offload needs Linux 6.2"},
		{"USO6 on a 6.1 host names its own flag", tapSnapshot(t, linuxGuest, linuxGuest, "6.1", "csum", "tso4", "tso6", "tso_ecn"),
			"GUEST_USO6", "off: tun on 6.1 refuses TUN_F_USO6; UDP segmentation offload needs Linux 6.2"},
		{"HOST_USO on a 6.1 host is the transmit side", tapSnapshot(t, linuxGuest, linuxGuest, "6.1", "csum", "tso4", "tso6", "tso_ecn"),
			"HOST_USO", "off: tun on 6.1 takes no USO frames from the guest (a virtio-net header with gso_type UDP_L4 gives EINVAL)"},
		{"USO on a 6.12 host", tapSnapshot(t, all, all, "6.12", "csum", "tso4", "tso6", "tso_ecn", "uso4", "uso6"),
			"HOST_USO", "on: the tap takes"},
		{"guest USO on a 6.12 host", tapSnapshot(t, all, all, "6.12", "csum", "tso4", "tso6", "tso_ecn", "uso4", "uso6"),
			"GUEST_USO6", "on: the tap's uso4,uso6 offload is on"},
		{"guest older than 6.2", tapSnapshot(t, all, linuxGuest, "6.12", "csum", "tso4", "tso6", "tso_ecn"),
			"GUEST_USO4", "off: the guest's driver did not take it (Linux guests take USO from 6.2)"},
		{"guest turned TSO off at runtime", tapSnapshot(t, linuxGuest, linuxGuest, "6.12", "csum", "tso6"),
			"GUEST_TSO4", "off: the guest acknowledged it but the tap's tso4 offload is off: the guest turned it off over the control queue"},
		{"QEMU never set the offload", tapSnapshot(t, linuxGuest, linuxGuest&^virtio.NetCtrlGuestOffloads, "6.12", "csum"),
			"GUEST_TSO6", "off: the guest acknowledged it but the tap's tso6 offload is off: someone ran ethtool -K vnet0 on the host, or QEMU did not set it"},
		{"guest with USO4 only", tapSnapshot(t, all, linuxGuest|virtio.NetGuestUSO4, "6.12", "csum", "tso4", "tso6", "tso_ecn"),
			"GUEST_USO4", "off: the guest acknowledged it but the tap's uso4 offload is off: tun takes USO only as the pair"},
		{"guest without GUEST_CSUM", tapSnapshot(t, linuxGuest, linuxGuest&^(virtio.NetGuestCsum|virtio.NetGuestTSO4), "6.12"),
			"GUEST_TSO4", "off: needs GUEST_CSUM, off (the guest did not acknowledge it)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := Explain(c.snap)
			if err != nil {
				t.Fatal(err)
			}
			if got := row(t, r, c.feature); !strings.HasPrefix(got.Verdict+": "+got.Reason, c.want) {
				t.Errorf("%s: %q, want %q...", c.feature, got.Verdict+": "+got.Reason, c.want)
			}
		})
	}

	s := tapSnapshot(t, linuxGuest&^virtio.NetHostTSO4, linuxGuest&^virtio.NetHostTSO4, "6.12", "csum", "tso4", "tso6", "tso_ecn")
	s.Props["host_tso4"] = false
	r, _ := Explain(s)
	if got := row(t, r, "HOST_TSO4"); got.Reason != "the NIC's property host_tso4 is off (-device virtio-net-pci,...,host_tso4=off; libvirt: <driver><host tso4='off'/>)" {
		t.Errorf("property off: %q", got.Reason)
	}

	s = tapSnapshot(t, linuxGuest&^(virtio.NetCsum|virtio.NetHostTSO4|virtio.NetHostTSO6|virtio.NetHostECN|virtio.NetGuestCsum|virtio.NetGuestTSO4|virtio.NetGuestTSO6|virtio.NetGuestECN), 0, "6.12")
	s.Tap.VnetHdr = false
	s.Status = status(linuxGuest&^0x3fff, 0, "ACKNOWLEDGE", "DRIVER")
	r, _ = Explain(s)
	if got := row(t, r, "HOST_TSO4"); !strings.Contains(got.Reason, "vnet_hdr=off") {
		t.Errorf("no vnet hdr: %q", got.Reason)
	}
	if got := row(t, r, "MRG_RXBUF"); !strings.Contains(got.Reason, "has not negotiated features yet (device status: ACKNOWLEDGE|DRIVER)") {
		t.Errorf("not negotiated: %q", got.Reason)
	}

	// A macvtap hides the offloads set on it.
	s = tapSnapshot(t, linuxGuest, linuxGuest, "6.12")
	s.Tap.Macvtap, s.Tap.OffloadsUnknown = true, true
	r, _ = Explain(s)
	if got := row(t, r, "GUEST_TSO4"); got.Verdict != "on" || !strings.Contains(got.Reason, "a macvtap does not show the offloads") {
		t.Errorf("macvtap: %+v", got)
	}

	// A lower device without TSO: on, done in software.
	s = tapSnapshot(t, linuxGuest, linuxGuest, "6.12", "csum", "tso4", "tso6", "tso_ecn")
	s.Lower = &Lower{Name: "eth0", Features: map[string]bool{"tx-tcp-segmentation": false, "tx-tcp6-segmentation": true}}
	r, _ = Explain(s)
	if got := row(t, r, "HOST_TSO4"); got.Lower != "no" || got.Verdict != "on" || !strings.Contains(got.Reason, "eth0 does not do it in hardware") {
		t.Errorf("lower: %+v", got)
	}
	if got := row(t, r, "HOST_TSO6"); got.Lower != "yes" {
		t.Errorf("lower: %+v", got)
	}
}

func TestExplainVDPA(t *testing.T) {
	neg := linuxGuest &^ virtio.NetGuestTSO6
	s := &Snapshot{Format: Format, NIC: "vdpa0", Status: status(linuxGuest, linuxGuest, "ACKNOWLEDGE", "DRIVER", "FEATURES_OK", "DRIVER_OK"),
		Netdev: Netdev{ID: "vhost-vdpa0", Type: "vhost-vdpa"},
		VDPA: &VDPAState{Device: "vdpa0", MgmtDev: "vduse", Features: uint64(linuxGuest), Negotiated: uint64(neg), HasNegotiated: true,
			MgmtFeatures: uint64(linuxGuest &^ virtio.NetHostECN)}}
	r, err := Explain(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := row(t, r, "GUEST_TSO6"); got.Verdict != "off" || got.Backend != "no" || !strings.Contains(got.Reason, "vdpa device vdpa0 did not negotiate it") {
		t.Errorf("GUEST_TSO6: %+v", got)
	}
	if got := row(t, r, "HOST_ECN"); got.Lower != "no" || got.Verdict != "on" {
		t.Errorf("HOST_ECN: %+v", got)
	}
	if got := row(t, r, "CTRL_VQ"); got.Verdict != "on" || got.Backend != "yes" {
		t.Errorf("CTRL_VQ: %+v", got)
	}
	if !strings.HasPrefix(r.Backend, "vhost-vdpa: vdpa0 (mgmtdev vduse)") {
		t.Errorf("backend %q", r.Backend)
	}
}

func TestQEMUFeatureNames(t *testing.T) {
	q := qemuFeatures{
		Transports: []string{"VIRTIO_F_IOMMU_PLATFORM: Device can be used on IOMMU platform", "VIRTIO_F_VERSION_1: Device compliant for v1 spec (legacy)"},
		Dev: []string{"VIRTIO_NET_F_GUEST_USO4: Driver can receive USOv4", "VIRTIO_NET_F_GUEST_USO4: Driver can receive USOv6",
			"VHOST_NET_F_VIRTIO_NET_HDR: Virtio-net headers for RX and TX packets supported",
			"VIRTIO_NET_F_HOST_UDP_TUNNEL_GSO: Device can receive GSO over UDP tunnel packets",
			"VIRTIO_NET_F_SOMETHING_NEW: from the future"},
		Unknown: 1 << 40,
	}
	f, unknown := q.word()
	want := virtio.AccessPlatform | virtio.Version1 | virtio.NetGuestUSO4 | virtio.NetGuestUSO6 | virtio.AnyLayout | virtio.RingReset
	if f != want || len(unknown) != 1 || unknown[0] != "VIRTIO_NET_F_SOMETHING_NEW" {
		t.Errorf("word %v unknown %v, want %v", f, unknown, want)
	}
	if shortKernel("6.1.0-57-amd64") != "6.1" || shortKernel("6.12.117+deb13-amd64") != "6.12" || shortKernel("6.18rc1") != "6.18" {
		t.Error("shortKernel")
	}
}

func TestSaveLoad(t *testing.T) {
	dir := t.TempDir()
	s := real72(t, "6.12")
	p := filepath.Join(dir, "snap.json")
	if err := s.Save(p); err != nil {
		t.Fatal(err)
	}
	got, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	r1, _ := Explain(s)
	r2, _ := Explain(got)
	b1, _ := json.Marshal(r1)
	b2, _ := json.Marshal(r2)
	if string(b1) != string(b2) {
		t.Errorf("a saved snapshot explains differently:\n%s\n%s", b1, b2)
	}
	os.WriteFile(p, []byte(`{"format":"other"}`), 0o644)
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "--save FILE") {
		t.Errorf("wrong format: %v", err)
	}
	os.WriteFile(p, []byte(`[1,2]`), 0o644)
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "not a snapshot") {
		t.Errorf("not JSON object: %v", err)
	}
	s.Status = json.RawMessage(`{"name":"virtio-blk","device-id":2}`)
	if _, err := Explain(s); err == nil || !strings.Contains(err.Error(), "not virtio-net") {
		t.Errorf("virtio-blk: %v", err)
	}
}

// FuzzExplain: any words and backend state explain without a panic, every
// row has a reason, and no offload is "on" unless offered and acknowledged.
func FuzzExplain(f *testing.F) {
	f.Add(uint64(linuxGuest), uint64(linuxGuest), uint8(0xff), true, uint8(0))
	f.Add(uint64(0), uint64(0), uint8(0), false, uint8(1))
	f.Add(uint64(linuxGuest|virtio.IndirectDesc), uint64(linuxGuest), uint8(0x1), true, uint8(4))
	f.Add(uint64(linuxGuest|virtio.RingReset), uint64(linuxGuest|virtio.RingReset), uint8(0x7), false, uint8(5))
	f.Fuzz(func(t *testing.T, host, guest uint64, offs uint8, vnet bool, kind uint8) {
		s := tapSnapshot(t, virtio.Features(host), virtio.Features(guest), "6.1")
		names := []string{"csum", "tso4", "tso6", "tso_ecn", "ufo", "uso4", "uso6"}
		for i, n := range names {
			if offs&(1<<i) != 0 {
				s.Tap.Offloads = append(s.Tap.Offloads, n)
			}
		}
		s.Tap.VnetHdr = vnet
		switch kind % 6 {
		case 1:
			s.Tap, s.VDPA = nil, &VDPAState{Device: "v", Negotiated: guest & host, HasNegotiated: offs&1 == 0, Features: host}
		case 2:
			s.Tap, s.Props, s.Host = nil, nil, nil
		case 3:
			s.Lower = &Lower{Name: "eth0", Features: map[string]bool{"tx-tcp-segmentation": offs&2 != 0}}
		case 4: // vhost=on, the type's defaults and a command line
			s.Status = withVhost(t, s.Status, virtio.Features(host)&vhostKernelBits, virtio.Features(guest)&vhostKernelBits)
			s.Defaults, s.Cmdline = map[string]bool{"queue_reset": true, "event_idx": true, "mq": false}, map[string]string{"guest_tso4": "off"}
		case 5: // a bare reply with vhost-dev
			s.Status = withVhost(t, s.Status, virtio.Features(host)&vhostKernelBits, virtio.Features(guest)&vhostKernelBits)
			s.Tap, s.Props, s.Netdev = nil, nil, Netdev{}
		}
		r, err := Explain(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range r.Features {
			if x.Reason == "" || (x.Verdict != "on" && x.Verdict != "off") {
				t.Fatalf("row %+v", x)
			}
			if x.Verdict == "on" && isOffload(virtio.Bit(x.Bit)) && !(x.Offered && x.Acked) {
				t.Fatalf("offload on without offer and ack: %+v", x)
			}
			if x.Verdict == "on" && x.Layer != "" {
				t.Fatalf("a bit that is on blames a layer: %+v", x)
			}
			if x.Layer == "dependency" {
				for _, req := range policy.Requirements {
					if req.F != virtio.Bit(x.Bit) {
						continue
					}
					for _, y := range r.Features {
						if req.AnyOf.Has(virtio.Bit(y.Bit)) && y.Verdict == "on" {
							t.Fatalf("%s blamed on its prerequisites, but %s is on", x.Feature, y.Feature)
						}
					}
				}
			}
		}
	})
}

// TestExplainVhostNet: with vhost=on, vhost-net speaks for the ring bits
// only; QEMU keeps the control queue and the tap takes the offloads.
func TestExplainVhostNet(t *testing.T) {
	words := linuxGuest &^ virtio.EventIdx
	s := tapSnapshot(t, words, words, "6.12", "csum", "tso4", "tso6", "tso_ecn")
	var st map[string]any
	json.Unmarshal(s.Status, &st)
	st["vhost-started"] = true
	st["vhost-dev"] = map[string]any{"features": map[string]any{"unknown-dev-features": uint64(virtio.Version1 | virtio.NetMrgRxbuf)},
		"acked-features": map[string]any{"unknown-dev-features": uint64(virtio.Version1 | virtio.NetMrgRxbuf)}}
	s.Status, _ = json.Marshal(st)
	r, err := Explain(s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.Backend, "vhost=on: vhost-net moves the packets") {
		t.Errorf("backend %q", r.Backend)
	}
	if got := row(t, r, "EVENT_IDX"); got.Verdict != "off" || got.Reason != "vhost-net on 6.12 does not offer it, so QEMU does not either" {
		t.Errorf("EVENT_IDX: %+v", got)
	}
	if got := row(t, r, "MRG_RXBUF"); got.Verdict != "on" || got.Backend != "yes" {
		t.Errorf("MRG_RXBUF: %+v", got)
	}
	if got := row(t, r, "CTRL_VQ"); got.Verdict != "on" || got.Backend != "-" {
		t.Errorf("CTRL_VQ: %+v", got)
	}
	if got := row(t, r, "GUEST_TSO4"); got.Verdict != "on" || got.Backend != "yes" {
		t.Errorf("GUEST_TSO4: %+v", got)
	}
}

// TestLoadBareReply: virsh qemu-monitor-command's output, and a bare
// status, load as snapshots without backend state.
func TestLoadBareReply(t *testing.T) {
	dir := t.TempDir()
	st := readFile(t, "testdata/qemu-7.2-status.json")
	for name, body := range map[string]string{
		"virsh.json": `{"return":` + string(st) + `,"id":"libvirt-42"}`,
		"bare.json":  string(st),
	} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o644)
		s, err := Load(p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if s.Tap != nil || s.Host != nil || s.Props != nil {
			t.Errorf("%s: backend state from nowhere: %+v", name, s)
		}
		r, err := Explain(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := row(t, r, "GUEST_USO4"); got.Reason != "QEMU did not offer it: the NIC's guest_uso4 property is off, or QEMU is older than 8.2 (netctl had no NIC properties to tell which)" {
			t.Errorf("%s: %q", name, got.Reason)
		}
		if got := row(t, r, "GUEST_TSO4"); got.Verdict != "on" || !strings.Contains(got.Reason, "no backend state was read") {
			t.Errorf("%s: %+v", name, got)
		}
	}
}
