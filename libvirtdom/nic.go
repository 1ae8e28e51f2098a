package libvirtdom

import (
	"fmt"
	"maps"
	"net"
	"path/filepath"
	"slices"
	"strings"

	"libvirt.org/go/libvirtxml"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/policy"
)

// NIC is a netctl NIC as libvirt is to see it.
type NIC struct {
	Tap    string // <interface type='ethernet'>: the tap netctl made (<target dev managed='no'>)
	VDPA   string // <interface type='vdpa'>: the vhost-vdpa node (/dev/vhost-vdpa-N)
	MAC    net.HardwareAddr
	MTU    int // 0: libvirt's default
	Queues int // queue pairs; 0 or 1: one
}

// Interface is the <interface> for n and decision d: type ethernet with
// <target dev='TAP' managed='no'/> (libvirt opens the tap and, for
// <driver name='vhost'>, /dev/vhost-net itself), or type vdpa with
// <source dev='/dev/vhost-vdpa-N'/>; <model type='virtio'/>, <mac>,
// <mtu>, and the <driver> of DriverFor. Unexpressed is DriverFor's, and
// its Override: a hotplug takes no <qemu:override>.
// Exactly one of Tap and VDPA must be set; errors wrap errs.ErrInvalid.
func (n NIC) Interface(d policy.Decision) (*libvirtxml.DomainInterface, []string, error) {
	x := &libvirtxml.DomainInterface{Model: &libvirtxml.DomainInterfaceModel{Type: "virtio"}}
	switch {
	case n.Tap != "" && n.VDPA == "":
		if !ifnameOK(n.Tap) {
			return nil, nil, fmt.Errorf("tap %q: not an interface name: %w", clip(n.Tap), errs.ErrInvalid)
		}
		if d.Backend == policy.BackendVDPA {
			return nil, nil, fmt.Errorf("tap %s with a vdpa decision: %w", n.Tap, errs.ErrInvalid)
		}
		x.Source = &libvirtxml.DomainInterfaceSource{Ethernet: &libvirtxml.DomainInterfaceSourceEthernet{}}
		x.Target = &libvirtxml.DomainInterfaceTarget{Dev: n.Tap, Managed: "no"}
	case n.VDPA != "" && n.Tap == "":
		if !filepath.IsAbs(n.VDPA) || filepath.Clean(n.VDPA) != n.VDPA || strings.ContainsAny(n.VDPA, "'\"<>&\x00") {
			return nil, nil, fmt.Errorf("vdpa node %q: give an absolute path such as /dev/vhost-vdpa-0: %w", clip(n.VDPA), errs.ErrInvalid)
		}
		if d.Backend != policy.BackendVDPA {
			return nil, nil, fmt.Errorf("vdpa node %s with a %s decision: %w", n.VDPA, d.Backend, errs.ErrInvalid)
		}
		x.Source = &libvirtxml.DomainInterfaceSource{VDPA: &libvirtxml.DomainInterfaceSourceVDPA{Device: n.VDPA}}
	default:
		return nil, nil, fmt.Errorf("a NIC is a tap or a vdpa node, one of them: %w", errs.ErrInvalid)
	}
	if n.MAC != nil {
		if len(n.MAC) != 6 {
			return nil, nil, fmt.Errorf("MAC %s: not an Ethernet address: %w", n.MAC, errs.ErrInvalid)
		}
		x.MAC = &libvirtxml.DomainInterfaceMAC{Address: n.MAC.String()}
	}
	if n.MTU != 0 {
		if n.MTU < 68 || n.MTU > 65521 {
			return nil, nil, fmt.Errorf("mtu %d: use 68 to 65521: %w", n.MTU, errs.ErrInvalid)
		}
		x.MTU = &libvirtxml.DomainInterfaceMTU{Size: uint(n.MTU)}
	}
	if n.Queues < 0 || n.Queues > policy.MaxQueues {
		return nil, nil, fmt.Errorf("%d queues: use 1 to %d: %w", n.Queues, policy.MaxQueues, errs.ErrInvalid)
	}
	q := 0
	if n.Queues > 1 {
		q = n.Queues
	}
	p := DriverFor(nil, d, q)
	x.Driver = p.Driver
	un := p.Unexpressed
	for _, k := range slices.Sorted(maps.Keys(p.Override)) {
		un = append(un, fmt.Sprintf("QEMU property %s=%s: libvirt sets it only through <qemu:override> when QEMU starts, never on a hotplug, so QEMU keeps its default", k, onOff(p.Override[k])))
	}
	return x, un, nil
}

// XML is Interface's element as text for Attach and Detach.
func (n NIC) XML(d policy.Decision) (string, []string, error) {
	x, un, err := n.Interface(d)
	if err != nil {
		return "", nil, err
	}
	s, err := x.Marshal()
	if err != nil {
		return "", nil, fmt.Errorf("interface XML: %w", err)
	}
	return s, un, nil
}

// ifnameOK is the kernel's dev_valid_name plus '%'.
func ifnameOK(s string) bool {
	return s != "" && len(s) <= 15 && s != "." && s != ".." && !strings.ContainsAny(s, "/: \t\n\r\v\f%\x00")
}
