package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/netctl/netctl/policy/host"
	"github.com/netctl/netctl/policy/probe"
)

// TestPrintProbeVDPAMigration: netctl probe shows under each vdpa device
// whether QEMU can migrate it and why, whether it suspends, and "unknown"
// for a device it did not look at; a device without the field (an older
// probe) prints no migration line.
func TestPrintProbeVDPAMigration(t *testing.T) {
	r := &probe.Result{Hostname: "h", Kernel: "6.12", VDPA: host.VDPA{Available: true, MgmtDevs: []string{"vduse"}, Devices: []host.VDPADevice{
		{Name: "v0", Driver: "vhost_vdpa", Features: []string{"VERSION_1"},
			Migration: &host.VDPAMigration{Reason: "QEMU 7.2.22 migrates vhost-vdpa only with x-svq=on", Facts: &host.VDPAFacts{BackendFeatures: "0xe"}}},
		{Name: "v1", Driver: "vhost_vdpa", Migration: &host.VDPAMigration{OK: true, Suspend: true, Reason: "control virtqueue in its own group"}},
		{Name: "v2", Driver: "vhost_vdpa", Migration: &host.VDPAMigration{Reason: "unknown: in use by pid 7 (qemu)"}},
		{Name: "v3", Driver: "virtio_vdpa"},
	}}}
	var b bytes.Buffer
	printProbe(&b, r)
	out := b.String()
	for _, want := range []string{
		"    migration: no: QEMU 7.2.22 migrates vhost-vdpa only with x-svq=on\n",
		"    migration: yes, suspends: control virtqueue in its own group\n",
		"    migration: unknown: in use by pid 7 (qemu)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "migration:") != 3 {
		t.Errorf("want 3 migration lines:\n%s", out)
	}
}
