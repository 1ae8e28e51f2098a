package libvirtdom

import (
	"os"
	"path/filepath"
	"testing"

	"libvirt.org/go/libvirtxml"

	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/virtio"
)

func seeds(f *testing.F) {
	fs, _ := filepath.Glob(filepath.Join("testdata", "*.xml"))
	if len(fs) == 0 {
		f.Fatal("no samples in testdata")
	}
	for _, p := range fs {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzParseDomain: ParseDomain never panics, whatever a daemon sends.
func FuzzParseDomain(f *testing.F) {
	seeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		ParseDomain(b)
	})
}

// FuzzPin: Pin never panics, and what it returns differs from the input
// only in the <driver> elements it reports.
func FuzzPin(f *testing.F) {
	seeds(f)
	d := policy.Decision{Backend: policy.BackendUserspace, Offer: virtio.NetCsum | virtio.NetGuestCsum}
	f.Fuzz(func(t *testing.T, b []byte) {
		out, changes, err := Pin(b, func(x *libvirtxml.DomainInterface) *libvirtxml.DomainInterfaceDriver {
			return DriverFor(x.Driver, d, 0).Driver
		})
		if err != nil {
			return
		}
		if back := outside(out, changes); back != string(b) {
			t.Errorf("Pin changed more than <driver>:\nin  %q\nout %q", b, out)
		}
	})
}

// FuzzOverride: Override never panics; what it returns parses (when its
// input does), holds the overrides it reports, and an Override of its own
// output changes nothing.
func FuzzOverride(f *testing.F) {
	seeds(f)
	want := func(x *libvirtxml.DomainInterface) map[string]bool {
		if x.MAC == nil {
			return nil
		}
		return map[string]bool{"queue_reset": false}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		out, changes, err := Override(b, want)
		if err != nil || len(changes) == 0 {
			return
		}
		dom, err := ParseDomain(out)
		if err != nil {
			if _, inErr := ParseDomain(b); inErr != nil {
				return // libvirtxml reads neither (an interface it cannot read is passed by)
			}
			t.Fatalf("Override's output does not parse: %v\nin  %q\nout %q", err, b, out)
		}
		for _, c := range changes {
			if c.Kept != "" {
				continue
			}
			found := false
			if dom.QEMUOverride != nil {
				for _, d := range dom.QEMUOverride.Devices {
					for _, p := range d.Frontend.Properties {
						found = found || d.Alias == c.Alias && p.Name == "queue_reset" && p.Value == "false"
					}
				}
			}
			if !found {
				t.Errorf("no override for %s in %q", c.Alias, out)
			}
		}
		again, ch2, err := Override(out, want)
		if err != nil || len(ch2) != 0 && ch2[0].Kept == "" || string(again) != string(out) && len(ch2) == 0 {
			t.Errorf("a second Override: %v %+v\nin  %q\nout %q", err, ch2, out, again)
		}
	})
}
