package hook

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"

	"libvirt.org/go/libvirtxml"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/state"
)

// Namespace is netctl's metadata namespace in a domain's <metadata>:
//
//	<metadata>
//	  <netctl:hook xmlns:netctl="http://netctl.dev/xmlns/hook/1">
//	    <netctl:interface mac="52:54:00:12:34:56" mgmtdev="vduse" backend="vdpa" profile="latency"/>
//	  </netctl:hook>
//	</metadata>
const Namespace = "http://netctl.dev/xmlns/hook/1"

// MaxXML bounds the domain XML read from stdin.
const MaxXML = 4 << 20

// MaxInterfaces bounds the interfaces of one domain the hook considers.
const MaxInterfaces = 512

// Kind is the kind of interface the hook manages.
type Kind string

const (
	KindTap    Kind = "tap"    // <interface type='ethernet'> with <target managed='no'/>
	KindVDPA   Kind = "vdpa"   // <interface type='vdpa'>
	KindDirect Kind = "direct" // <interface type='direct'> (macvtap; checked only)
)

// Interface is one interface the hook manages.
type Interface struct {
	Kind    Kind
	MAC     net.HardwareAddr // nil when the XML gives none
	Name    string           // tap name, vdpa device name, or direct's lower device
	Queues  int              // <driver queues>; 0 means one
	MTU     int              // <mtu size>; 0 keeps the default
	Vhost   bool             // <driver name='vhost'>
	Driver  string           // <driver name>: "vhost", "qemu" or ""
	Force   Forced           // what <driver><host/><guest/> forces on and off
	Mgmtdev string           // vdpa: the management device
	Link    string           // vdpa: the path the XML names (VDPADir/NAME)
	Backend string           // metadata: backend preference (vdpa, vhost-net, userspace)
	Profile string           // metadata: policy profile
}

// Plan is what the hook will do for one domain.
type Plan struct {
	Domain     string
	UUID       string
	Owner      int // the uid QEMU runs as (taps are owned by it)
	Interfaces []Interface
}

type metaHook struct {
	XMLName    xml.Name    `xml:"http://netctl.dev/xmlns/hook/1 hook"`
	Interfaces []metaIface `xml:"http://netctl.dev/xmlns/hook/1 interface"`
	Other      []anyElem   `xml:",any"`
	OtherAttrs []xml.Attr  `xml:",any,attr"`
}

type metaIface struct {
	MAC        string     `xml:"mac,attr"`
	Mgmtdev    string     `xml:"mgmtdev,attr"`
	Backend    string     `xml:"backend,attr"`
	Profile    string     `xml:"profile,attr"`
	Other      []anyElem  `xml:",any"`
	OtherAttrs []xml.Attr `xml:",any,attr"`
}

type anyElem struct {
	XMLName xml.Name
}

// ReadXML reads at most MaxXML bytes of domain XML.
func ReadXML(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxXML+1))
	if err != nil {
		return nil, fmt.Errorf("reading the domain XML: %w", err)
	}
	if len(b) > MaxXML {
		return nil, fmt.Errorf("domain XML over %d bytes: libvirt passes a domain's XML on stdin; this is not one: %w", MaxXML, errs.ErrInvalid)
	}
	return b, nil
}

// ParsePlan parses a domain XML and decides, with the host config, which
// interfaces the hook manages and how. It touches nothing on the host
// except reading the user database for a named owner. Every error wraps
// errs.ErrInvalid and says which element is wrong.
func ParsePlan(domainXML []byte, cfg *Config) (*Plan, error) {
	if len(domainXML) > MaxXML {
		return nil, fmt.Errorf("domain XML over %d bytes: %w", MaxXML, errs.ErrInvalid)
	}
	var d libvirtxml.Domain
	if err := d.Unmarshal(string(domainXML)); err != nil {
		return nil, fmt.Errorf("domain XML: %v: %w", oneLine(err.Error()), errs.ErrInvalid)
	}
	if d.Name == "" {
		return nil, fmt.Errorf("domain XML has no <name>: %w", errs.ErrInvalid)
	}
	if err := state.CheckVMName(d.Name); err != nil {
		return nil, fmt.Errorf("domain XML: <name>: %w", err)
	}
	if len(d.UUID) > 64 {
		return nil, fmt.Errorf("domain %s: <uuid> of %d bytes: %w", d.Name, len(d.UUID), errs.ErrInvalid)
	}
	p := &Plan{Domain: d.Name, UUID: d.UUID}
	meta, err := parseMetadata(d.Metadata)
	if err != nil {
		return nil, err
	}
	owner, err := ownerOf(&d, cfg)
	if err != nil {
		return nil, err
	}
	p.Owner = owner
	var ifaces []libvirtxml.DomainInterface
	if d.Devices != nil {
		ifaces = d.Devices.Interfaces
	}
	if len(ifaces) > MaxInterfaces {
		return nil, fmt.Errorf("domain %s has %d interfaces; the hook handles at most %d: %w", d.Name, len(ifaces), MaxInterfaces, errs.ErrInvalid)
	}
	used := map[string]bool{}
	for i := range ifaces {
		it, err := planInterface(&ifaces[i], i, meta, used, cfg)
		if err != nil {
			return nil, fmt.Errorf("domain %s: %w", d.Name, err)
		}
		if it == nil {
			continue
		}
		if it.Force, err = parseForced(ifaces[i].Driver, ifaceName(it.MAC, i)); err != nil {
			return nil, fmt.Errorf("domain %s: %w", d.Name, err)
		}
		if it.Kind != KindDirect {
			key := string(it.Kind) + ":" + it.Name
			if used[key] {
				return nil, fmt.Errorf("domain %s: %s %s is named by two interfaces: give each its own: %w", d.Name, it.Kind, it.Name, errs.ErrInvalid)
			}
			used[key] = true
		}
		p.Interfaces = append(p.Interfaces, *it)
	}
	for mac, m := range meta {
		if !m.seen {
			return nil, fmt.Errorf("domain %s: netctl metadata names interface %s, which the domain does not have: fix the MAC in <netctl:interface>: %w", d.Name, mac, errs.ErrInvalid)
		}
	}
	return p, nil
}

type metaEntry struct {
	metaIface
	seen bool
}

func parseMetadata(md *libvirtxml.DomainMetadata) (map[string]*metaEntry, error) {
	out := map[string]*metaEntry{}
	if md == nil || !strings.Contains(md.XML, Namespace) {
		return out, nil
	}
	dec := xml.NewDecoder(strings.NewReader(md.XML))
	found := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("domain <metadata>: %v: %w", oneLine(err.Error()), errs.ErrInvalid)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		if se.Name.Space != Namespace {
			if err := dec.Skip(); err != nil {
				return nil, fmt.Errorf("domain <metadata>: %v: %w", oneLine(err.Error()), errs.ErrInvalid)
			}
			continue
		}
		if se.Name.Local != "hook" || found {
			return nil, fmt.Errorf("netctl metadata: <%s>: use one <netctl:hook> holding <netctl:interface mac=... mgmtdev=... backend=... profile=...> elements: %w", clip(se.Name.Local), errs.ErrInvalid)
		}
		found = true
		var h metaHook
		if err := dec.DecodeElement(&h, &se); err != nil {
			return nil, fmt.Errorf("netctl metadata: %v: %w", oneLine(err.Error()), errs.ErrInvalid)
		}
		if err := checkUnknown("<netctl:hook>", h.Other, h.OtherAttrs, "interface"); err != nil {
			return nil, err
		}
		if len(h.Interfaces) > MaxInterfaces {
			return nil, fmt.Errorf("netctl metadata lists %d interfaces, at most %d: %w", len(h.Interfaces), MaxInterfaces, errs.ErrInvalid)
		}
		for _, mi := range h.Interfaces {
			if err := checkUnknown("<netctl:interface>", mi.Other, mi.OtherAttrs, "mac, mgmtdev, backend, profile"); err != nil {
				return nil, err
			}
			mac, err := net.ParseMAC(mi.MAC)
			if err != nil || len(mac) != 6 {
				return nil, fmt.Errorf("netctl metadata: <netctl:interface mac=%q>: give the interface's MAC (52:54:00:12:34:56): %w", clip(mi.MAC), errs.ErrInvalid)
			}
			switch mi.Backend {
			case "", "vdpa", "vhost-net", "userspace":
			default:
				return nil, fmt.Errorf("netctl metadata: interface %s: backend %q: use vdpa, vhost-net or userspace: %w", mac, clip(mi.Backend), errs.ErrInvalid)
			}
			if mi.Mgmtdev != "" {
				if err := checkMgmtdev(mi.Mgmtdev); err != nil {
					return nil, fmt.Errorf("netctl metadata: interface %s: %w", mac, err)
				}
			}
			if len(mi.Profile) > 64 {
				return nil, fmt.Errorf("netctl metadata: interface %s: profile of %d bytes: %w", mac, len(mi.Profile), errs.ErrInvalid)
			}
			if out[mac.String()] != nil {
				return nil, fmt.Errorf("netctl metadata lists interface %s twice: %w", mac, errs.ErrInvalid)
			}
			out[mac.String()] = &metaEntry{metaIface: mi}
		}
	}
	return out, nil
}

func checkUnknown(where string, els []anyElem, attrs []xml.Attr, known string) error {
	for _, e := range els {
		return fmt.Errorf("netctl metadata: %s has an unknown element <%s>; it holds %s: %w", where, clip(e.XMLName.Local), known, errs.ErrInvalid)
	}
	for _, a := range attrs {
		if a.Name.Space == "xmlns" || a.Name.Local == "xmlns" {
			continue
		}
		return fmt.Errorf("netctl metadata: %s has an unknown attribute %s; it knows %s: %w", where, clip(a.Name.Local), known, errs.ErrInvalid)
	}
	return nil
}

func planInterface(x *libvirtxml.DomainInterface, i int, meta map[string]*metaEntry, _ map[string]bool, cfg *Config) (*Interface, error) {
	var mac net.HardwareAddr
	if x.MAC != nil && x.MAC.Address != "" {
		m, err := net.ParseMAC(x.MAC.Address)
		if err != nil || len(m) != 6 {
			return nil, fmt.Errorf("interface %d: <mac address=%q> is not a MAC: %w", i, clip(x.MAC.Address), errs.ErrInvalid)
		}
		mac = m
	}
	var me *metaEntry
	if mac != nil {
		me = meta[mac.String()]
	}
	listed := me != nil
	if listed {
		if me.seen {
			return nil, fmt.Errorf("two interfaces have MAC %s, which netctl's metadata names: give each interface its own <mac address>: %w", mac, errs.ErrInvalid)
		}
		me.seen = true
	}
	it := &Interface{MAC: mac}
	if x.Driver != nil {
		if x.Driver.Queues > 256 {
			return nil, fmt.Errorf("interface %s: <driver queues='%d'>: a tap or vdpa device has at most 256: %w", ifaceName(mac, i), x.Driver.Queues, errs.ErrInvalid)
		}
		it.Queues = int(x.Driver.Queues)
		it.Vhost = x.Driver.Name == "vhost"
		switch x.Driver.Name {
		case "", "vhost", "qemu":
			it.Driver = x.Driver.Name
		default:
			// libvirt knows only these two for a virtio NIC.
			return nil, fmt.Errorf("interface %s: <driver name=%q>: use 'vhost' or 'qemu': %w", ifaceName(mac, i), clip(x.Driver.Name), errs.ErrInvalid)
		}
	}
	if x.MTU != nil {
		if x.MTU.Size > 65521 || (x.MTU.Size != 0 && x.MTU.Size < 68) {
			return nil, fmt.Errorf("interface %s: <mtu size='%d'>: use 68 to 65521: %w", ifaceName(mac, i), x.MTU.Size, errs.ErrInvalid)
		}
		it.MTU = int(x.MTU.Size)
	}
	if me != nil {
		it.Mgmtdev, it.Backend, it.Profile = me.Mgmtdev, me.Backend, me.Profile
	}
	src := x.Source
	switch {
	case src != nil && src.Ethernet != nil:
		if x.Target == nil || x.Target.Managed != "no" {
			if listed {
				return nil, fmt.Errorf("interface %s: netctl creates a tap only for <target dev='NAME' managed='no'/> (libvirt creates the others): add it or drop the interface from netctl's metadata: %w", ifaceName(mac, i), errs.ErrInvalid)
			}
			return nil, nil
		}
		if !listed && cfg.Manage != ManageAll {
			return nil, nil
		}
		if !ifnameOK(x.Target.Dev) {
			return nil, fmt.Errorf("interface %s: <target dev=%q>: use an interface name of 1 to 15 characters without '/', ':', '%%' or spaces: %w", ifaceName(mac, i), clip(x.Target.Dev), errs.ErrInvalid)
		}
		if err := checkDriverBackend(it, ifaceName(mac, i)); err != nil {
			return nil, err
		}
		// backend vdpa on a tap: policy.Decide refuses it with its reason.
		it.Kind, it.Name = KindTap, x.Target.Dev
		return it, nil
	case src != nil && src.VDPA != nil:
		dir := filepath.Dir(src.VDPA.Device)
		if dir != cfg.VDPADir {
			if listed {
				return nil, fmt.Errorf("interface %s: <source dev=%q>: netctl publishes vdpa devices as %s/NAME; name one there: %w", ifaceName(mac, i), clip(src.VDPA.Device), cfg.VDPADir, errs.ErrInvalid)
			}
			return nil, nil // an existing /dev/vhost-vdpa-N: libvirt's own way
		}
		name := filepath.Base(src.VDPA.Device)
		if !vdpaNameOK(name) {
			return nil, fmt.Errorf("interface %s: <source dev=%q>: the vdpa device name must be 1 to 32 letters, digits, '-' or '_': %w", ifaceName(mac, i), clip(src.VDPA.Device), errs.ErrInvalid)
		}
		if it.Backend != "" && it.Backend != "vdpa" {
			return nil, fmt.Errorf("interface %s: netctl metadata asks for backend %s, but a type='vdpa' interface is a vdpa device: drop backend or use backend vdpa: %w", ifaceName(mac, i), it.Backend, errs.ErrInvalid)
		}
		if it.Mgmtdev == "" {
			it.Mgmtdev = cfg.Mgmtdev
		}
		if it.Mgmtdev == "" {
			return nil, fmt.Errorf("interface %s: no management device for vdpa %s: name one in netctl's metadata (<netctl:interface mac=... mgmtdev=\"vduse\"/>) or in the host config (mgmtdev): %w", ifaceName(mac, i), name, errs.ErrInvalid)
		}
		it.Kind, it.Name, it.Link = KindVDPA, name, src.VDPA.Device
		return it, nil
	case src != nil && src.Direct != nil:
		if !listed && cfg.Manage != ManageAll {
			return nil, nil
		}
		if !ifnameOK(src.Direct.Dev) {
			return nil, fmt.Errorf("interface %s: <source dev=%q>: not an interface name: %w", ifaceName(mac, i), clip(src.Direct.Dev), errs.ErrInvalid)
		}
		if err := checkDriverBackend(it, ifaceName(mac, i)); err != nil {
			return nil, err
		}
		it.Kind, it.Name = KindDirect, src.Direct.Dev
		return it, nil
	}
	if listed {
		return nil, fmt.Errorf("interface %s: netctl manages type ethernet (managed='no'), vdpa and direct interfaces only: drop it from netctl's metadata: %w", ifaceName(mac, i), errs.ErrInvalid)
	}
	return nil, nil
}

// checkDriverBackend refuses a metadata backend that <driver name>
// contradicts.
func checkDriverBackend(it *Interface, iface string) error {
	switch {
	case it.Backend == "userspace" && it.Driver == "vhost":
		return fmt.Errorf("interface %s: netctl metadata asks for backend userspace but <driver name='vhost'> asks for vhost-net: drop one: %w", iface, errs.ErrInvalid)
	case it.Backend == "vhost-net" && it.Driver == "qemu":
		return fmt.Errorf("interface %s: netctl metadata asks for backend vhost-net but <driver name='qemu'> asks for QEMU's userspace virtio-net: drop one: %w", iface, errs.ErrInvalid)
	}
	return nil
}

func ownerOf(d *libvirtxml.Domain, cfg *Config) (int, error) {
	for _, s := range d.SecLabel {
		if s.Model == "dac" && s.Label != "" && s.Type != "none" {
			uid, err := lookupUser(dacUser(s.Label))
			if err != nil {
				return 0, fmt.Errorf("domain %s: DAC seclabel %q: %w", d.Name, clip(s.Label), err)
			}
			return uid, nil
		}
	}
	if cfg.TapOwner != "" {
		return lookupUser(cfg.TapOwner)
	}
	return 0, nil
}

func ifaceName(mac net.HardwareAddr, i int) string {
	if mac != nil {
		return mac.String()
	}
	return fmt.Sprintf("#%d", i)
}

// ifnameOK is the kernel's dev_valid_name (no '/', ':' or isspace
// character, at most IFNAMSIZ-1 bytes, not "." or "..") plus '%'.
func ifnameOK(s string) bool {
	return s != "" && len(s) <= 15 && s != "." && s != ".." && !strings.ContainsAny(s, "/: \t\n\r\v\f%\x00")
}

func vdpaNameOK(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// clip bounds a string from outside for an error message.
func clip(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return oneLine(s)
}

func oneLine(s string) string {
	var b bytes.Buffer
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			r = ' '
		}
		b.WriteRune(r)
	}
	if b.Len() > 300 {
		return b.String()[:300] + "..."
	}
	return b.String()
}
