package hook

import (
	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/virtio"
)

// QEMUNamespace is libvirt's namespace for QEMU passthrough in a domain
// (<qemu:override>, libvirt 8.2+; formatdomain.rst "QEMU command-line
// passthrough").
const QEMUNamespace = "http://libvirt.org/schemas/domain/qemu/1.0"

// qemuOverride is <qemu:override>: properties of a device's frontend,
// by its alias, as netctl plan's pin writes them:
//
//	<qemu:override><qemu:device alias='net0'><qemu:frontend>
//	  <qemu:property name='queue_reset' type='bool' value='false'/>
//	</qemu:frontend></qemu:device></qemu:override>
type qemuOverride struct {
	Devices []struct {
		Alias    string `xml:"alias,attr"`
		Frontend []struct {
			Props []struct {
				Name  string `xml:"name,attr"`
				Type  string `xml:"type,attr"`
				Value string `xml:"value,attr"`
			} `xml:"http://libvirt.org/schemas/domain/qemu/1.0 property"`
		} `xml:"http://libvirt.org/schemas/domain/qemu/1.0 frontend"`
	} `xml:"http://libvirt.org/schemas/domain/qemu/1.0 device"`
}

// maxOverrideProps bounds the properties overridesOff looks at.
const maxOverrideProps = 4096

// dropProp is the bit a virtio-net-pci property drops and the value
// that drops it ("off", or "on" for disable-modern).
type dropProp struct {
	f     virtio.Features
	value string
}

// dropProps maps each managed bit's property to its dropProp.
var dropProps = func() map[string]dropProp {
	m := map[string]dropProp{}
	for _, o := range policy.Offloads {
		m[o.Prop] = dropProp{o.F, "off"}
	}
	for _, r := range policy.RingFeatures {
		m[r.Prop] = dropProp{r.F, r.Value}
	}
	return m
}()

// overridesOff are the managed bits the domain's <qemu:override>s drop on
// the device with alias: a property of type bool whose value drops the
// bit (false for "off"). Any other type or value is not taken for a pin
// (libvirt passes a bool property's value to QEMU as JSON true/false; a
// string would not set a bool property).
func overridesOff(ovs []qemuOverride, alias string) virtio.Features {
	var off virtio.Features
	n := 0
	for _, o := range ovs {
		for _, d := range o.Devices {
			if d.Alias != alias {
				continue
			}
			for _, fe := range d.Frontend {
				for _, p := range fe.Props {
					if n++; n > maxOverrideProps {
						return off
					}
					dp, ok := dropProps[p.Name]
					if !ok || p.Type != "bool" {
						continue
					}
					if (dp.value == "off" && p.Value == "false") || (dp.value == "on" && p.Value == "true") {
						off |= dp.f
					}
				}
			}
		}
	}
	return off
}
