package kubevirt

import (
	"encoding/xml"
	"fmt"
	"maps"

	"libvirt.org/go/libvirtxml"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/libvirtdom"
	"github.com/netctl/netctl/policy"
)

// DefaultBindingName is the binding's name in the KubeVirt CR
// (spec.configuration.network.binding.netctl) when virt-launcher sets no
// NETWORK_BINDING_PLUGIN_NAME on the sidecar.
const DefaultBindingName = "netctl"

// Config is what the sidecar is started with.
type Config struct {
	// BindingName: the VMI interfaces whose binding.name is this one
	// are netctl's ("" is DefaultBindingName).
	BindingName string
	// Plan pins the pool's offloads (nil: no offload attribute is
	// written; QEMU offers what the tap or device has).
	Plan *Plan
	// QEMU is virt-launcher's QEMU version ("9.1.0"; "" unknown): the
	// plan's properties that only newer QEMUs have are left out for an
	// older one, which would refuse them and offers no such feature.
	QEMU string
}

// Input is one OnDefineDomain call: the domain XML and VMI JSON as
// virt-launcher sends them, and the network-info file's content (nil
// without one).
type Input struct {
	DomainXML   []byte
	VMI         []byte
	NetworkInfo []byte
}

// Rewritten is one interface DefineDomain rewrote.
type Rewritten struct {
	Name   string `json:"name"`  // the VMI interface
	Alias  string `json:"alias"` // ua-<name>
	Kind   string `json:"kind"`  // "tap" or "vdpa"
	Device string `json:"device,omitempty"`
	Queues int    `json:"queues,omitempty"`
	Before string `json:"driver_before,omitempty"`
	After  string `json:"driver_after,omitempty"`
	// Override are the QEMU properties written as <qemu:override>.
	Override    map[string]bool `json:"qemu_override,omitempty"`
	Unexpressed []string        `json:"not_in_libvirt_xml,omitempty"`
}

// Result is DefineDomain's answer: the domain XML to return to
// virt-launcher and what changed in it.
type Result struct {
	DomainXML  []byte      `json:"-"`
	Interfaces []Rewritten `json:"interfaces"`
}

// DefineDomain rewrites in.DomainXML for the VMI's interfaces whose
// binding is cfg's: each is found by its alias ua-<interface name>
// (KubeVirt's user alias; domainAttachmentType: tap made it
// <interface type='ethernet'> on the CNI's tap). It stays an ethernet
// interface on that tap, or, where the network-info file names a
// vhost-vdpa device for its network, becomes <interface type='vdpa'>
// on that device (MAC, PCI address, ACPI index, model, alias, boot order
// and ROM kept). Its <driver> gets name='vhost' (none for vdpa), queues
// from the VMI (multiqueue: one per vCPU, at most MultiQueueMaxQueues)
// and, with a plan, every offload attribute the plan pins
// (libvirtdom.DriverFor), the rest in <qemu:override> on the alias
// (libvirtdom.Override). Every other byte of the domain stays (the qemu
// namespace, <qemu:commandline>, metadata). A VMI with no interface of
// this binding gets its domain back unchanged. Errors wrap
// errs.ErrInvalid and say what is wrong: input over its bound, XML or
// JSON that does not parse, an interface of the binding the domain lacks.
func DefineDomain(in Input, cfg Config) (Result, error) {
	name := cfg.BindingName
	if name == "" {
		name = DefaultBindingName
	}
	if len(in.DomainXML) > libvirtdom.MaxXML {
		return Result{}, fmt.Errorf("domain XML of %d bytes, over %d: %w", len(in.DomainXML), libvirtdom.MaxXML, errs.ErrInvalid)
	}
	v, err := parseVMI(in.VMI)
	if err != nil {
		return Result{}, err
	}
	var ours []vmiInterface
	for _, it := range v.Spec.Domain.Devices.Interfaces {
		if it.Binding != nil && it.Binding.Name == name && it.State != "absent" {
			ours = append(ours, it)
		}
	}
	res := Result{DomainXML: in.DomainXML, Interfaces: []Rewritten{}}
	if len(ours) == 0 {
		return res, nil
	}
	vdpa, err := parseNetworkInfo(in.NetworkInfo)
	if err != nil {
		return Result{}, err
	}
	dom, err := libvirtdom.ParseDomain(in.DomainXML)
	if err != nil {
		return Result{}, err
	}
	var vcpus uint
	if dom.VCPU != nil {
		vcpus = dom.VCPU.Value
	}
	queues := v.queues(vcpus)
	byAlias := map[string]int{} // alias -> index in res.Interfaces
	for _, it := range ours {
		alias := libvirtdom.UserAliasPrefix + it.Name
		if _, dup := byAlias[alias]; dup {
			return Result{}, fmt.Errorf("VMI %s names interface %s twice: %w", clip(v.Metadata.Name), clip(it.Name), errs.ErrInvalid)
		}
		n := 0
		if dom.Devices != nil {
			for i := range dom.Devices.Interfaces {
				if libvirtdom.Alias(&dom.Devices.Interfaces[i]) == alias {
					n++
				}
			}
		}
		switch {
		case n == 0:
			return Result{}, fmt.Errorf("the domain has no interface with alias %s for VMI interface %s: register the binding %s with domainAttachmentType: tap "+
				"(deploy/kubevirt-binding.yaml), which makes KubeVirt write it: %w", clip(alias), clip(it.Name), clip(name), errs.ErrInvalid)
		case n > 1:
			// libvirt refuses duplicate aliases; which one is ours is unknown.
			return Result{}, fmt.Errorf("the domain has %d interfaces with alias %s (VMI interface %s), which libvirt refuses: "+
				"netctl rewrites none of them: %w", n, clip(alias), clip(it.Name), errs.ErrInvalid)
		}
		rw := Rewritten{Name: it.Name, Alias: alias, Kind: "tap"}
		if dev, ok := vdpa[it.Name]; ok {
			rw.Kind, rw.Device = "vdpa", dev
		} else {
			rw.Queues = queues
		}
		byAlias[alias] = len(res.Interfaces)
		res.Interfaces = append(res.Interfaces, rw)
	}
	ourIndex := func(x *libvirtxml.DomainInterface) (int, bool) {
		i, ok := byAlias[libvirtdom.Alias(x)]
		return i, ok
	}
	out := in.DomainXML
	if len(vdpa) > 0 {
		out, _, err = libvirtdom.Replace(out, func(x *libvirtxml.DomainInterface) *libvirtxml.DomainInterface {
			i, ok := ourIndex(x)
			if !ok || res.Interfaces[i].Kind != "vdpa" {
				return nil
			}
			y := *x
			y.Source = &libvirtxml.DomainInterfaceSource{VDPA: &libvirtxml.DomainInterfaceSourceVDPA{Device: res.Interfaces[i].Device}}
			y.Target = nil // a vdpa interface has no tap
			y.Managed = ""
			return &y
		})
		if err != nil {
			return Result{}, err
		}
	}
	overrides := map[int]map[string]bool{}
	out, _, err = libvirtdom.Pin(out, func(x *libvirtxml.DomainInterface) *libvirtxml.DomainInterfaceDriver {
		i, ok := ourIndex(x)
		if !ok {
			return nil
		}
		rw := &res.Interfaces[i]
		backend := policy.BackendVhostNet
		if rw.Kind == "vdpa" {
			backend = policy.BackendVDPA
		}
		rw.Before = driverText(x.Driver)
		var d *libvirtxml.DomainInterfaceDriver
		if cfg.Plan != nil {
			dec, notes := cfg.Plan.decision(backend, cfg.QEMU)
			p := libvirtdom.DriverFor(x.Driver, dec, rw.Queues)
			overrides[i], rw.Unexpressed = p.Override, append(notes, p.Unexpressed...)
			d = p.Driver
		} else {
			d = &libvirtxml.DomainInterfaceDriver{}
			if x.Driver != nil {
				*d = *x.Driver
			}
			d.Name = libvirtdom.DriverName(backend)
			if rw.Queues > 0 {
				d.Queues = uint(rw.Queues)
			}
		}
		rw.After = driverText(d)
		return d
	})
	if err != nil {
		return Result{}, err
	}
	if cfg.Plan != nil {
		out, _, err = libvirtdom.Override(out, func(x *libvirtxml.DomainInterface) map[string]bool {
			if i, ok := ourIndex(x); ok {
				return overrides[i]
			}
			return nil
		})
		if err != nil {
			return Result{}, err
		}
		for i, ov := range overrides {
			if len(ov) > 0 {
				res.Interfaces[i].Override = maps.Clone(ov)
			}
		}
	}
	res.DomainXML = out
	return res, nil
}

// driverText is d as XML ("" for none).
func driverText(d *libvirtxml.DomainInterfaceDriver) string {
	if d == nil {
		return ""
	}
	b, err := xml.Marshal(struct {
		XMLName xml.Name `xml:"driver"`
		*libvirtxml.DomainInterfaceDriver
	}{DomainInterfaceDriver: d})
	if err != nil {
		return ""
	}
	return string(b)
}
