package libvirtattach

import (
	"errors"
	"net"
	"testing"

	"libvirt.org/go/libvirtxml"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/libvirtdom"
	"github.com/netctl/netctl/policy"
)

// TestCheckFree: an alias or MAC the domain has is refused (ErrConflict)
// before anything is made; others pass.
func TestCheckFree(t *testing.T) {
	x := &libvirtxml.Domain{Devices: &libvirtxml.DomainDeviceList{Interfaces: []libvirtxml.DomainInterface{
		{MAC: &libvirtxml.DomainInterfaceMAC{Address: "52:54:00:00:00:01"}, Alias: &libvirtxml.DomainAlias{Name: "net0"}},
		{MAC: &libvirtxml.DomainInterfaceMAC{Address: "52:54:00:00:00:02"}, Alias: &libvirtxml.DomainAlias{Name: Alias("net1")}},
		{}, // no MAC, no alias
	}}}
	mac := func(s string) net.HardwareAddr { m, _ := net.ParseMAC(s); return m }
	for _, c := range []struct {
		id, mac string
		ok      bool
	}{
		{"net1", "52:54:00:00:00:09", false},
		{"net2", "52:54:00:00:00:01", false},
		{"net2", "52:54:00:00:00:09", true},
	} {
		err := checkFree(x, Alias(c.id), mac(c.mac), c.id)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, errs.ErrConflict)) {
			t.Errorf("id %s mac %s: %v", c.id, c.mac, err)
		}
	}
	if err := checkFree(&libvirtxml.Domain{}, Alias("a"), mac("52:54:00:00:00:01"), "a"); err != nil {
		t.Errorf("a domain without devices: %v", err)
	}
}

// TestInterfaceXMLHasAlias: the interface libvirt gets carries netctl's
// alias (detach and list find it by that), the tap as <target
// managed='no'>, the MAC and the queues.
func TestInterfaceXMLHasAlias(t *testing.T) {
	mac, _ := net.ParseMAC("52:54:00:00:00:07")
	s, _, err := interfaceXML(libvirtdom.NIC{Tap: "nctl3", MAC: mac, Queues: 2}, policy.Decision{Backend: policy.BackendVhostNet}, Alias("net7"))
	if err != nil {
		t.Fatal(err)
	}
	var x libvirtxml.DomainInterface
	if err := x.Unmarshal(s); err != nil {
		t.Fatalf("%v\n%s", err, s)
	}
	if x.Alias == nil || x.Alias.Name != "ua-netctl-net7" || x.Target == nil || x.Target.Dev != "nctl3" || x.Target.Managed != "no" ||
		x.MAC == nil || x.MAC.Address != "52:54:00:00:00:07" || x.Driver == nil || x.Driver.Name != "vhost" || x.Driver.Queues != 2 {
		t.Errorf("interface XML:\n%s", s)
	}
}

// TestAttachRefusesBeforeDialling: bad requests fail with ErrInvalid or
// ErrNotAvailable before any connection (an unreachable URI would say so).
func TestAttachRefusesBeforeDialling(t *testing.T) {
	for _, r := range []Request{
		{ID: "-bad", Domain: "d"},
		{ID: "net1", Domain: "d", Backend: "macvtap"},
		{ID: "net1", Domain: "d", VDPA: "vdpa0", Mgmtdev: "vduse"},
		{ID: "net1", Domain: "d", VDPA: "vdpa0", Backend: policy.BackendVhostNet},
		{ID: "net1", Domain: "d", Mgmtdev: "vduse", Backend: policy.BackendUserspace},
		{ID: "net1", Domain: "d", VDPA: "../x"},
		{ID: "net1", Domain: "d", Mgmtdev: "a b"},
		{ID: "net1", Domain: "d", Queues: 300},
		{ID: "net1", Domain: "d", MAC: "01:00:5e:00:00:01"},
		{ID: "net1", Domain: "d", MTU: 20},
	} {
		r.URI = "qemu+unix:///system?socket=/nonexistent/sock"
		_, err := Attach(t.Context(), r)
		if err == nil || !(errors.Is(err, errs.ErrInvalid) || errors.Is(err, errs.ErrNotAvailable)) || errors.Is(err, libvirtdom.ErrUnreachable) {
			t.Errorf("%+v: %v", r, err)
		}
	}
}
