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
