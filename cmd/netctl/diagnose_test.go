package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netctl/netctl/policy/diagnose"
)

// vhostDev is the vhost-dev member QEMU 7.2 reported for a vhost=on NIC on
// 6.12 (shared/docs/real-vmm-recipes.md part 2); on 6.1 vhost-net offers
// no RING_RESET (bit 40, which QEMU 7.2 prints as an unknown bit).
func vhostDev(kernel string) map[string]any {
	ring := uint64(1) << 40
	if kernel == "6.1" {
		ring = 0
	}
	return map[string]any{"n-tmp-sections": 1, "n-mem-sections": 1, "max-queues": 1, "backend-cap": 2, "log-size": 0, "nvqs": 2, "vq-index": 0,
		"log-enabled": false,
		"acked-features": map[string]any{"dev-features": []string{"VIRTIO_NET_F_MRG_RXBUF"},
			"transports": []string{"VIRTIO_RING_F_EVENT_IDX", "VIRTIO_RING_F_INDIRECT_DESC", "VIRTIO_F_VERSION_1"}, "unknown-dev-features": ring},
		"features": map[string]any{"dev-features": []string{"VHOST_F_LOG_ALL", "VIRTIO_NET_F_MRG_RXBUF"},
			"transports": []string{"EVENT_IDX", "INDIRECT_DESC", "IOMMU_PLATFORM", "VERSION_1", "ANY_LAYOUT", "NOTIFY_ON_EMPTY"}, "unknown-dev-features": ring},
		"backend-features": map[string]any{"dev-features": []string{}, "transports": []string{}}}
}

// TestDiagnoseBareReplyVhost: libvirt's path, netctl diagnose --from a
// reply saved with virsh and no --tap: what QMP says about vhost stands on
// its own (issue 11, defect 2), and on 6.1 RING_RESET has a row that
// blames vhost-net (defect 1).
func TestDiagnoseBareReplyVhost(t *testing.T) {
	b, err := os.ReadFile("../../policy/diagnose/testdata/qemu-7.2-status.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, kernel := range []string{"6.12", "6.1"} {
		var st map[string]any
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatal(err)
		}
		st["vhost-started"], st["vhost-dev"] = true, vhostDev(kernel)
		if kernel == "6.1" { // QEMU drops what vhost-net did not offer from its offer, and the guest's
			for _, k := range []string{"host-features", "guest-features"} {
				st[k].(map[string]any)["unknown-dev-features"] = 0
			}
		}
		reply, _ := json.Marshal(map[string]any{"return": st, "id": "libvirt-42"})
		p := filepath.Join(t.TempDir(), "virsh.json")
		os.WriteFile(p, reply, 0o644)
		var r diagnose.Report
		if err := json.Unmarshal([]byte(run(t, "diagnose", "--from", p, "--id", "net0", "--no-probe", "--json")), &r); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(r.Backend, "vhost=on: vhost-net moves the packets") {
			t.Errorf("%s: backend %q", kernel, r.Backend)
		}
		rows := map[string]diagnose.Row{}
		for _, x := range r.Features {
			rows[x.Feature] = x
		}
		for _, f := range []string{"MRG_RXBUF", "EVENT_IDX", "INDIRECT_DESC", "VERSION_1"} {
			if x := rows[f]; x.Verdict != "on" || x.Backend != "yes" {
				t.Errorf("%s: %s: %+v, want on and carried by vhost-net", kernel, f, x)
			}
		}
		x, ok := rows["RING_RESET"]
		switch {
		case kernel == "6.12" && (x.Verdict != "on" || x.Backend != "yes"):
			t.Errorf("6.12: RING_RESET %+v", x)
		case kernel == "6.1" && (!ok || x.Verdict != "off" || x.Layer != "vhost-net" || x.Reason != "the host's vhost-net does not offer it, so QEMU does not either"):
			t.Errorf("6.1: RING_RESET %+v (row: %v)", x, ok)
		}
	}
}
