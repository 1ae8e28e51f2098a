package libvirtdom

import (
	"encoding/xml"
	"errors"
	"net"
	"strings"
	"testing"

	"libvirt.org/go/libvirtxml"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/policy/host"
	"github.com/netctl/netctl/virtio"
)

// decision is policy's decision on a host whose tap takes csum and TSO
// (not UFO or ECN) for backend.
func decision(t *testing.T, backend, profile string) policy.Decision {
	t.Helper()
	h := host.Description{}
	h.Tap.Available = true
	h.Tap.Offloads = []string{"csum", "tso4", "tso6"}
	h.VhostNet.Available = true
	yes := true
	h.VhostNet.BusyPoll = &yes
	d, err := policy.Decide(&h, policy.Request{Backend: backend, Queues: 2, Profile: profile})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// attrsOf reads an element's attributes from raw XML, exactly as written.
func attrsOf(t *testing.T, s, elem string) map[string]string {
	t.Helper()
	dec := xml.NewDecoder(strings.NewReader(s))
	for {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("no <%s> in %s", elem, s)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == elem {
			m := map[string]string{}
			for _, a := range se.Attr {
				m[a.Name.Local] = a.Value
			}
			return m
		}
	}
}

func eq(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestNICTapXML: the ethernet interface for a userspace decision on a tap
// that carries csum and TSO: every attribute exact, and the XML round
// trips through libvirtxml unchanged.
func TestNICTapXML(t *testing.T) {
	d := decision(t, policy.BackendUserspace, "")
	mac, _ := net.ParseMAC("52:54:00:aa:bb:cc")
	s, un, err := NIC{Tap: "nctl3", MAC: mac, MTU: 9000, Queues: 2}.XML(d)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s\nunexpressed: %q", s, un)
	for _, c := range []struct {
		elem string
		want map[string]string
	}{
		{"interface", map[string]string{"type": "ethernet"}},
		{"target", map[string]string{"dev": "nctl3", "managed": "no"}},
		{"model", map[string]string{"type": "virtio"}},
		{"mac", map[string]string{"address": "52:54:00:aa:bb:cc"}},
		{"mtu", map[string]string{"size": "9000"}},
		{"driver", map[string]string{"name": "qemu", "queues": "2", "event_idx": "on"}},
		{"host", map[string]string{"csum": "on", "tso4": "on", "tso6": "on", "ecn": "on", "ufo": "off", "mrg_rxbuf": "on"}},
		{"guest", map[string]string{"csum": "on", "tso4": "on", "tso6": "on", "ecn": "off", "ufo": "off"}},
	} {
		if got := attrsOf(t, s, c.elem); !eq(got, c.want) {
			t.Errorf("<%s> %v, want %v", c.elem, got, c.want)
		}
	}
	var x libvirtxml.DomainInterface
	if err := x.Unmarshal(s); err != nil {
		t.Fatal(err)
	}
	again, err := x.Marshal()
	if err != nil || again != s {
		t.Errorf("round trip through libvirtxml changed it (%v):\n%s", err, again)
	}
	if x.Source == nil || x.Source.Ethernet == nil || x.Driver.Host.UFO != "off" || x.Driver.Guest.ECN != "off" {
		t.Errorf("libvirtxml reads %+v", x)
	}
	if len(un) != 3 || !strings.Contains(strings.Join(un, "\n"), "guest_uso4=off") {
		t.Errorf("unexpressed %q: want the three USO properties libvirt has no attribute for", un)
	}
}

// TestNICVhostLatency: vhost-net with profile latency: driver name vhost,
// and the busy polling libvirt cannot express is said.
func TestNICVhostLatency(t *testing.T) {
	d := decision(t, policy.BackendVhostNet, policy.Latency)
	s, un, err := NIC{Tap: "nctl0", Queues: 1}.XML(d)
	if err != nil {
		t.Fatal(err)
	}
	if a := attrsOf(t, s, "driver"); a["name"] != "vhost" || a["queues"] != "" {
		t.Errorf("<driver> %v: want name vhost and no queues for one queue", a)
	}
	if !strings.Contains(strings.Join(un, "\n"), "busy polling of 50 µs") {
		t.Errorf("unexpressed %q lacks the busy polling", un)
	}
}

// TestNICVDPAXML: a vdpa interface: source dev, no driver name.
func TestNICVDPAXML(t *testing.T) {
	d := policy.Decision{Backend: policy.BackendVDPA, Offer: virtio.NetCsum | virtio.NetGuestCsum | virtio.NetMrgRxbuf}
	s, _, err := NIC{VDPA: "/dev/vhost-vdpa-0", Queues: 4}.XML(d)
	if err != nil {
		t.Fatal(err)
	}
	if a := attrsOf(t, s, "interface"); a["type"] != "vdpa" {
		t.Errorf("<interface> %v", a)
	}
	if a := attrsOf(t, s, "source"); !eq(a, map[string]string{"dev": "/dev/vhost-vdpa-0"}) {
		t.Errorf("<source> %v", a)
	}
	if a := attrsOf(t, s, "driver"); a["name"] != "" || a["queues"] != "4" {
		t.Errorf("<driver> %v", a)
	}
	if a := attrsOf(t, s, "host"); a["csum"] != "on" || a["tso4"] != "off" || a["mrg_rxbuf"] != "on" {
		t.Errorf("<host> %v", a)
	}
}

func TestNICRefuses(t *testing.T) {
	u := decision(t, policy.BackendUserspace, "")
	v := policy.Decision{Backend: policy.BackendVDPA}
	for _, c := range []struct {
		n NIC
		d policy.Decision
	}{
		{NIC{}, u},
		{NIC{Tap: "a", VDPA: "/dev/vhost-vdpa-0"}, u},
		{NIC{Tap: "has space"}, u},
		{NIC{Tap: "a/b"}, u},
		{NIC{Tap: "nctl0"}, v},
		{NIC{VDPA: "relative"}, v},
		{NIC{VDPA: "/dev/vhost-vdpa-0'/><x"}, v},
		{NIC{VDPA: "/dev/vhost-vdpa-0"}, u},
		{NIC{Tap: "nctl0", MTU: 10}, u},
		{NIC{Tap: "nctl0", Queues: 1000}, u},
		{NIC{Tap: "nctl0", MAC: net.HardwareAddr{1, 2}}, u},
	} {
		if _, _, err := c.n.XML(c.d); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", c.n, err)
		}
	}
}

// TestDriverForKeepsOthers: attributes netctl does not decide stay.
func TestDriverForKeepsOthers(t *testing.T) {
	old := &libvirtxml.DomainInterfaceDriver{Name: "vhost", TXMode: "iothread", RXQueueSize: 512, Queues: 4,
		Host: &libvirtxml.DomainInterfaceDriverHost{GSO: "off", CSum: "off"}}
	p := DriverFor(old, decision(t, policy.BackendUserspace, ""), 0)
	d := p.Driver
	if d.Name != "qemu" || d.TXMode != "iothread" || d.RXQueueSize != 512 || d.Queues != 4 || d.Host.GSO != "off" || d.Host.CSum != "on" {
		t.Errorf("DriverFor = %+v %+v", d, d.Host)
	}
	if old.Host.CSum != "off" || old.Name != "vhost" {
		t.Errorf("DriverFor changed the old driver: %+v", old)
	}
}
