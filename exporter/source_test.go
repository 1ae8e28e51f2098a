package exporter

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/netctl/netctl/qemuproc"
	"github.com/netctl/netctl/stats"
)

// TestStatsSourceListing: one scrape reads the state directory once,
// however many VMs it was given; a VM whose listing fails keeps its NICs
// of the last listing while its QEMU runs, and what the Collector kept
// of their rings is dropped (without the listing nothing says the NIC
// is still plugged: a detached NIC's rings are freed memory).
func TestStatsSourceListing(t *testing.T) {
	start, err := qemuproc.StartTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	reads := 0
	var fail error
	var forgotten []string
	s := &StatsSource{VMs: []string{"a", "b", "c"},
		listState: func(string) ([]stats.Target, error) {
			reads++
			return []stats.Target{{VM: "a", NIC: "net0", PID: os.Getpid(), PIDStart: start}}, nil
		},
		listQEMU: func(_ context.Context, vm, _ string) ([]stats.Target, error) {
			if vm == "b" && fail != nil {
				return nil, fail
			}
			return []stats.Target{{VM: vm, NIC: "net0", PID: os.Getpid() + len(vm) + int(vm[0]), PIDStart: start},
				{VM: vm, NIC: "nic-" + vm, PID: os.Getpid(), PIDStart: start}}, nil
		},
		forget: func(t stats.Target) { forgotten = append(forgotten, t.VM+"/"+t.NIC) },
	}
	ts, by := s.Targets(context.Background())
	if reads != 1 {
		t.Errorf("the state was read %d times in one listing, want once", reads)
	}
	if len(ts) != 7 || by["state"] != nil || by["vm:b"] != nil {
		t.Errorf("targets %+v by %v", ts, by)
	}
	fail = errors.New("monitor busy: held by pid 9 (virsh)")
	ts, by = s.Targets(context.Background())
	if reads != 2 || by["vm:b"] == nil {
		t.Errorf("reads %d, by %v", reads, by)
	}
	var names []string
	for _, t := range ts {
		names = append(names, t.VM+"/"+t.NIC)
	}
	if !slices.Contains(names, "b/nic-b") || slices.Contains(forgotten, "a/nic-a") {
		t.Errorf("listed %v, forgotten %v", names, forgotten)
	}
	// b/net0's pid is not a running process here: dropped; b/nic-b (this
	// process) kept, its rings forgotten.
	if slices.Contains(names, "b/net0") || !slices.Equal(forgotten, []string{"b/nic-b"}) {
		t.Errorf("listed %v, forgotten %v: want b/nic-b kept with its rings forgotten", names, forgotten)
	}
}

// TestStatsSourceLibvirtDomains: a libvirt domain's NICs are listed
// through libvirt (listLibvirt on the source's URI), never over QMP, and
// merged with netctl's record of the same interface (by UUID and alias).
func TestStatsSourceLibvirtDomains(t *testing.T) {
	var asked []string
	s := &StatsSource{Domains: []string{"lv"}, LibvirtURI: "qemu+unix:///system?socket=/x",
		listState: func(string) ([]stats.Target, error) {
			return []stats.Target{{VM: "lv", NIC: "net1", Libvirt: &stats.LibvirtTarget{UUID: "u", Alias: "ua-netctl-net1"}}}, nil
		},
		listQEMU: func(_ context.Context, vm, _ string) ([]stats.Target, error) {
			t.Errorf("QMP listing of %q for a libvirt domain", vm)
			return nil, nil
		},
		listLibvirt: func(_ context.Context, uri, d string) ([]stats.Target, error) {
			asked = append(asked, uri+" "+d)
			return []stats.Target{{VM: "lv", NIC: "ua-netctl-net1", PID: 5, Libvirt: &stats.LibvirtTarget{UUID: "u", Alias: "ua-netctl-net1"}},
				{VM: "lv", NIC: "net0", PID: 5, Libvirt: &stats.LibvirtTarget{UUID: "u", Alias: "net0"}}}, nil
		},
	}
	ts, by := s.Targets(context.Background())
	if !slices.Equal(asked, []string{"qemu+unix:///system?socket=/x lv"}) || by["libvirt:lv"] != nil {
		t.Errorf("asked %v, by %v", asked, by)
	}
	if len(ts) != 2 || ts[0].NIC != "net1" || ts[1].NIC != "net0" {
		t.Errorf("targets %+v: want the record's net1 and libvirt's net0", ts)
	}
}
