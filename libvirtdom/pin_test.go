package libvirtdom

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"libvirt.org/go/libvirtxml"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/policy"
)

// outside is b with every Change's After removed where it was put: what
// Pin must leave exactly as it was.
func outside(b []byte, changes []Change) string {
	s := string(b)
	for _, c := range changes {
		s = strings.Replace(s, c.written, c.Before, 1)
	}
	return s
}

// TestPinOnlyDriver: on netctl-offloads.xml (a managed tap with a full
// <driver>) and libvirt's own net-virtio-disable-offloads.xml, Pin
// rewrites the chosen interface's <driver> and nothing else: putting the
// old <driver> text back gives the input byte for byte.
func TestPinOnlyDriver(t *testing.T) {
	d := decision(t, policy.BackendUserspace, "")
	for _, f := range []string{"netctl-offloads.xml", "libvirt-disable-offloads.xml", "netctl-all.xml"} {
		in, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		out, changes, err := Pin(in, func(x *libvirtxml.DomainInterface) *libvirtxml.DomainInterfaceDriver {
			if x.MAC == nil {
				return nil
			}
			return DriverFor(x.Driver, d, 0).Driver
		})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if len(changes) == 0 {
			t.Fatalf("%s: no change", f)
		}
		if back := outside(out, changes); back != string(in) {
			t.Errorf("%s: Pin changed more than <driver>:\n%s", f, out)
		}
		dom, err := ParseDomain(out)
		if err != nil {
			t.Fatalf("%s: the pinned XML does not parse: %v", f, err)
		}
		for _, x := range dom.Devices.Interfaces {
			if x.MAC == nil {
				continue
			}
			if x.Driver == nil || x.Driver.Name != "qemu" || x.Driver.Host == nil || x.Driver.Host.CSum != "on" || x.Driver.Guest.UFO != "off" {
				t.Errorf("%s: interface %s pinned to %+v", f, x.MAC.Address, x.Driver)
			}
		}
		for _, c := range changes {
			t.Logf("%s: %s\n- %s\n+ %s", f, c.MAC, c.Before, c.After)
		}
	}
}

// TestPinNothingChosen: an interface pin passes by stays byte for byte,
// and pinning what is already pinned changes nothing.
func TestPinNothingChosen(t *testing.T) {
	in, err := os.ReadFile(filepath.Join("testdata", "netctl-all.xml"))
	if err != nil {
		t.Fatal(err)
	}
	out, changes, err := Pin(in, func(*libvirtxml.DomainInterface) *libvirtxml.DomainInterfaceDriver { return nil })
	if err != nil || len(changes) != 0 || string(out) != string(in) {
		t.Errorf("Pin choosing nothing: %v, %d changes, same %v", err, len(changes), string(out) == string(in))
	}
	d := decision(t, policy.BackendUserspace, "")
	pin := func(x *libvirtxml.DomainInterface) *libvirtxml.DomainInterfaceDriver {
		return DriverFor(x.Driver, d, 0).Driver
	}
	once, _, err := Pin(in, pin)
	if err != nil {
		t.Fatal(err)
	}
	twice, changes, err := Pin(once, pin)
	if err != nil || len(changes) != 0 || string(twice) != string(once) {
		t.Errorf("Pin of a pinned domain: %v, changes %+v", err, changes)
	}
}

// TestPinInsertsDriver: an interface without <driver> gets one inside it.
func TestPinInsertsDriver(t *testing.T) {
	in := "<domain>\n  <devices>\n    <interface type='ethernet'>\n      <mac address='52:54:00:00:00:01'/>\n    </interface>\n  </devices>\n</domain>\n"
	out, changes, err := Pin([]byte(in), func(*libvirtxml.DomainInterface) *libvirtxml.DomainInterfaceDriver {
		return &libvirtxml.DomainInterfaceDriver{Name: "qemu", Queues: 2}
	})
	want := "<domain>\n  <devices>\n    <interface type='ethernet'>\n      <mac address='52:54:00:00:00:01'/>\n      <driver name=\"qemu\" queues=\"2\"></driver>\n    </interface>\n  </devices>\n</domain>\n"
	if err != nil || string(out) != want || len(changes) != 1 || changes[0].Before != "" {
		t.Errorf("Pin: %v %+v\n%s", err, changes, out)
	}
}

func TestPinRefuses(t *testing.T) {
	drv := func(*libvirtxml.DomainInterface) *libvirtxml.DomainInterfaceDriver {
		return &libvirtxml.DomainInterfaceDriver{Name: "qemu"}
	}
	for _, in := range []string{"", "<network/>", "<domain><devices><interface type='user'/></devices></domain>",
		"<domain><devices><interface>", "<domain>" + strings.Repeat("x", MaxXML) + "</domain>"} {
		if _, _, err := Pin([]byte(in), drv); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("Pin(%.40q): %v, want ErrInvalid", in, err)
		}
	}
}

func TestParseUUID(t *testing.T) {
	u, ok := ParseUUID("c7a5fdbd-edaf-9455-926a-d65c16db1809")
	if !ok || FormatUUID(u) != "c7a5fdbd-edaf-9455-926a-d65c16db1809" {
		t.Errorf("ParseUUID: %v %s", ok, FormatUUID(u))
	}
	if u2, ok := ParseUUID("C7A5FDBDEDAF9455926AD65C16DB1809"); !ok || u2 != u {
		t.Errorf("ParseUUID without dashes: %v", ok)
	}
	for _, s := range []string{"", "nctl", "c7a5fdbd-edaf-9455-926a-d65c16db180", "c7a5fdbd+edaf-9455-926a-d65c16db1809", "g7a5fdbdedaf9455926ad65c16db1809"} {
		if _, ok := ParseUUID(s); ok {
			t.Errorf("ParseUUID(%q) ok", s)
		}
	}
}

func TestParseDomainBounded(t *testing.T) {
	if _, err := ParseDomain(make([]byte, MaxXML+1)); !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("over MaxXML: %v", err)
	}
	if _, err := ParseDomain([]byte("<domain><devices><interface type='ethernet'><mac address='x'/>")); !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("truncated: %v", err)
	}
}

// TestUnpin: what Pin wrote is gone (name, event_idx, offloads but gso),
// queues stay, and pinning the unpinned definition again gives the pinned
// one.
func TestUnpin(t *testing.T) {
	in, err := os.ReadFile(filepath.Join("testdata", "netctl-offloads.xml"))
	if err != nil {
		t.Fatal(err)
	}
	un, err := Unpin(in)
	if err != nil {
		t.Fatal(err)
	}
	d, err := ParseDomain(un)
	if err != nil {
		t.Fatal(err)
	}
	drv := d.Devices.Interfaces[0].Driver
	if drv == nil || drv.Name != "" || drv.Queues != 2 || drv.Guest != nil || drv.EventIDX != "" || (drv.Host != nil && *drv.Host != libvirtxml.DomainInterfaceDriverHost{GSO: drv.Host.GSO}) {
		t.Errorf("Unpin left %+v", drv)
	}
	dec := decision(t, policy.BackendUserspace, "")
	pin := func(x *libvirtxml.DomainInterface) *libvirtxml.DomainInterfaceDriver {
		return DriverFor(x.Driver, dec, 0).Driver
	}
	a, _, err := Pin(in, pin)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := Pin(un, pin)
	if err != nil || string(a) != string(b) {
		t.Errorf("Pin(Unpin(x)) != Pin(x): %v\n%s\n%s", err, a, b)
	}
}
