package policy

import (
	"strings"
	"testing"

	"libvirt.org/go/libvirtxml"
)

// TestLibvirtPinIsLibvirtXML: the plan's libvirt snippets, for every
// managed property off (and some on), put into a domain's interface and
// its <qemu:override> as docs/migration.md says, parse as libvirt's domain XML
// (libvirtxml) and say what the properties say: each <driver>
// attribute, each override property with its bool value on the alias.
func TestLibvirtPinIsLibvirtXML(t *testing.T) {
	all := map[string]string{}
	for _, m := range managed {
		all[m.prop] = m.value
	}
	some := map[string]string{"guest_tso4": "on", "queue_reset": "on", "host_uso": "off", "event_idx": "off", "mq": "on"}
	for name, props := range map[string]map[string]string{"all off": all, "some": some, "none": {}} {
		pin := libvirtPin(props, nil)
		override := strings.ReplaceAll(pin.OverrideXML, "ALIAS", "ua-net1")
		dom := "<domain type='kvm' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'><name>d</name><devices>" +
			"<interface type='ethernet'><model type='virtio'/>" + pin.Driver + "<alias name='ua-net1'/></interface></devices>" + override + "</domain>"
		var d libvirtxml.Domain
		if err := d.Unmarshal(dom); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, dom)
		}
		drv := d.Devices.Interfaces[0].Driver
		for p, v := range props {
			a, ok := LibvirtAttrFor(p)
			if !ok {
				if p == "mq" || p == "vectors" {
					continue
				}
				if d.QEMUOverride == nil || len(d.QEMUOverride.Devices) != 1 || d.QEMUOverride.Devices[0].Alias != "ua-net1" {
					t.Fatalf("%s: %s: no override on ua-net1: %s", name, p, dom)
				}
				found := false
				for _, q := range d.QEMUOverride.Devices[0].Frontend.Properties {
					if q.Name == p && q.Type == "bool" && q.Value == map[string]string{"on": "true", "off": "false"}[v] {
						found = true
					}
				}
				if !found {
					t.Errorf("%s: %s=%s not in the override %+v", name, p, v, d.QEMUOverride.Devices[0].Frontend)
				}
				continue
			}
			var got string
			switch {
			case drv == nil:
			case a.Side == "host" && drv.Host != nil:
				got = map[string]string{"csum": drv.Host.CSum, "tso4": drv.Host.TSO4, "tso6": drv.Host.TSO6, "ecn": drv.Host.ECN, "ufo": drv.Host.UFO, "mrg_rxbuf": drv.Host.MrgRXBuf}[a.Attr]
			case a.Side == "guest" && drv.Guest != nil:
				got = map[string]string{"csum": drv.Guest.CSum, "tso4": drv.Guest.TSO4, "tso6": drv.Guest.TSO6, "ecn": drv.Guest.ECN, "ufo": drv.Guest.UFO}[a.Attr]
			case a.Side == "":
				got = drv.EventIDX
			}
			if got != v {
				t.Errorf("%s: %s: libvirt reads <driver> %s %s=%q, want %q (%s)", name, p, a.Side, a.Attr, got, v, pin.Driver)
			}
		}
	}
}
