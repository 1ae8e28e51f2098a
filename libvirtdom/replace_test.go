package libvirtdom

import (
	"errors"
	"strings"
	"testing"

	"libvirt.org/go/libvirtxml"

	"github.com/netctl/netctl/internal/errs"
)

// TestReplace: Replace turns a chosen ethernet interface into a vdpa one
// and leaves every byte outside it, and the other interface, as they
// were; an interface with an element libvirtxml does not know is refused
// rather than rewritten without it.
func TestReplace(t *testing.T) {
	in := `<domain type='kvm'>
  <name>r</name>
  <devices>
    <interface type='ethernet'>
      <mac address='52:54:00:00:00:01'/>
      <target dev='tap0' managed='no'/>
      <model type='virtio'/>
      <alias name='ua-one'/>
    </interface>
    <interface type='ethernet'>
      <mac address='52:54:00:00:00:02'/>
      <target dev='tap1' managed='no'/>
    </interface>
  </devices>
</domain>
`
	toVDPA := func(x *libvirtxml.DomainInterface) *libvirtxml.DomainInterface {
		if Alias(x) != "ua-one" {
			return nil
		}
		y := *x
		y.Source = &libvirtxml.DomainInterfaceSource{VDPA: &libvirtxml.DomainInterfaceSourceVDPA{Device: "/dev/vhost-vdpa-0"}}
		y.Target = nil
		return &y
	}
	out, n, err := Replace([]byte(in), toVDPA)
	if err != nil || n != 1 {
		t.Fatalf("Replace: %d, %v", n, err)
	}
	s := string(out)
	i, j := strings.Index(s, "<interface"), strings.Index(s, "</interface>")
	if s[:i] != in[:strings.Index(in, "<interface")] || s[j:] != in[strings.Index(in, "</interface>"):] {
		t.Errorf("bytes outside the interface changed:\n%s", s)
	}
	d, err := ParseDomain(out)
	if err != nil {
		t.Fatal(err)
	}
	x := d.Devices.Interfaces[0]
	if x.Source == nil || x.Source.VDPA == nil || x.Target != nil || x.MAC.Address != "52:54:00:00:00:01" || x.Model.Type != "virtio" {
		t.Errorf("replaced interface %+v", x)
	}
	unknown := strings.Replace(in, "<model type='virtio'/>", "<model type='virtio'/><x-future-thing on='yes'/>", 1)
	if _, _, err := Replace([]byte(unknown), toVDPA); !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "x-future-thing") {
		t.Errorf("an interface with an unknown element: %v, want a refusal naming it", err)
	}
	if _, _, err := Replace(make([]byte, MaxXML+1), toVDPA); !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("over MaxXML: %v", err)
	}
}
