package libvirtdom

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRunsOf reads what each interface of a sample runs.
func TestRunsOf(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "netctl-offloads.xml"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := ParseDomain(b)
	if err != nil {
		t.Fatal(err)
	}
	r := RunsOf(&d.Devices.Interfaces[0])
	t.Log(r)
	if r.Type != "ethernet" || r.Driver != "vhost" || r.Queues != 2 || len(r.Offloads) == 0 {
		t.Errorf("RunsOf = %+v", r)
	}
	b, _ = os.ReadFile(filepath.Join("testdata", "net-vdpa.xml"))
	if d, err = ParseDomain(b); err != nil {
		t.Fatal(err)
	}
	if r := RunsOf(&d.Devices.Interfaces[0]); r.Type != "vdpa" || r.Target != "/dev/vhost-vdpa-0" || r.String() != "vdpa /dev/vhost-vdpa-0: vhost-vdpa, 1 queue(s)" {
		t.Errorf("RunsOf vdpa = %+v %q", r, r)
	}
}
