package hook

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"

	"libvirt.org/go/libvirtxml"

	"github.com/netctl/netctl/hostnic"
	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/state"
	"github.com/netctl/netctl/virtio"
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
	// Alias is the interface's device alias (<alias name>), else the
	// one libvirt gives it at start (net0, net1, ... by position).
	Alias string
	// Pinned are the managed bits the domain turns off beyond
	// <driver><host/><guest/> (Force.Off): <driver event_idx='off'>,
	// and <qemu:override> properties on the interface's alias that drop
	// a bit (queue_reset, host_uso, ... set to false): what netctl
	// plan's pin sets.
	Pinned virtio.Features
	// Attached: the interface is netctl's by its alias alone
	// (AttachAliasPrefix: netctl attach --persistent put it in the
	// persistent definition), not by metadata or the config.
	Attached bool
}

// AttachAliasPrefix starts the alias of every interface netctl attach
// --vm gives a libvirt domain (ua-netctl-ID; libvirtattach.Alias). An
// ethernet interface with <target managed='no'/> and such an alias is
// netctl's without metadata: netctl attach --persistent put it in the
// persistent definition, so at the next start the hook makes its tap,
// which the release that ended the last run deleted.
const AttachAliasPrefix = "ua-netctl-"

// Plan is what the hook will do for one domain.
type Plan struct {
	Domain     string
	UUID       string
	Type       string // the domain's type attribute: vhost-net only for "kvm" (host.ForLibvirtDomain)
	Owner      int    // the taps' owner (tap_owner in the config), or NoOwner
	Machine    string // <os><type machine>: "pc-q35-7.2" (bounded; "" when none)
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

// ReadXML reads at most MaxXML+1 bytes of domain XML; over says there was
// more than MaxXML (the caller then drains the rest with drainMarked).
func ReadXML(r io.Reader) (b []byte, over bool, err error) {
	if r == nil {
		return nil, false, nil
	}
	b, err = io.ReadAll(io.LimitReader(r, MaxXML+1))
	if err != nil {
		return nil, false, fmt.Errorf("reading the domain XML: %w", err)
	}
	if len(b) <= MaxXML {
		return b, false, nil
	}
	return b, true, nil
}

// drainMarked reads the rest of r and says whether any of b and the rest
// holds one of marks (a mark split across two reads is found too).
func drainMarked(b []byte, r io.Reader, marks [][]byte) bool {
	found := hasAny(b, marks)
	keep := 0
	for _, m := range marks {
		keep = max(keep, len(m))
	}
	tail := append([]byte(nil), b[max(len(b)-keep, 0):]...)
	buf := make([]byte, 64<<10)
	for r != nil {
		n, err := r.Read(buf)
		if n > 0 && !found {
			win := append(tail, buf[:n]...)
			found = hasAny(win, marks)
			tail = append(tail[:0], win[max(len(win)-keep, 0):]...)
		}
		if err != nil {
			break
		}
	}
	return found
}

func hasAny(b []byte, marks [][]byte) bool {
	for _, m := range marks {
		if bytes.Contains(b, m) {
			return true
		}
	}
	return false
}

// Marks are the byte strings whose absence from a domain's XML proves
// that netctl manages nothing in it under cfg (nil: the config did not
// load, so its defaults stand in): netctl's metadata namespace, the vdpa
// directory it publishes in, and under manage "all" the interface types
// it takes without metadata.
func Marks(cfg *Config) [][]byte {
	dir := DefaultVDPADir
	if cfg != nil {
		dir = cfg.VDPADir
	}
	m := [][]byte{[]byte(Namespace), []byte(dir + "/"), []byte("'" + AttachAliasPrefix), []byte(`"` + AttachAliasPrefix)}
	if cfg != nil && cfg.Manage == ManageAll {
		m = append(m, []byte("ethernet"), []byte("direct"))
	}
	return m
}

// liteDomain is what the hook reads of every domain: no more than it
// needs to tell whether netctl manages anything in it, so that nothing
// else in the XML (a value libvirtxml would refuse, an interface type
// netctl does not know) can stop a domain netctl has nothing to do with.
type liteDomain struct {
	XMLName  xml.Name
	Type     string `xml:"type,attr"`
	Name     string `xml:"name"`
	UUID     string `xml:"uuid"`
	Metadata *struct {
		XML string `xml:",innerxml"`
	} `xml:"metadata"`
	SecLabel []struct {
		Type  string `xml:"type,attr"`
		Model string `xml:"model,attr"`
		Label string `xml:"label"`
	} `xml:"seclabel"`
	Devices *struct {
		Interfaces []liteIface `xml:"interface"`
	} `xml:"devices"`
	Override []qemuOverride `xml:"http://libvirt.org/schemas/domain/qemu/1.0 override"`
	OS       *struct {
		Type struct {
			Machine string `xml:"machine,attr"`
		} `xml:"type"`
	} `xml:"os"`
}

type liteIface struct {
	Attrs []xml.Attr `xml:",any,attr"`
	MAC   *struct {
		Address string `xml:"address,attr"`
	} `xml:"mac"`
	Source *struct {
		Dev string `xml:"dev,attr"`
	} `xml:"source"`
	Target *struct {
		Managed string `xml:"managed,attr"`
	} `xml:"target"`
	Alias *struct {
		Name string `xml:"name,attr"`
	} `xml:"alias"`
	Inner string `xml:",innerxml"`
}

func (l *liteIface) attr(name string) string {
	for _, a := range l.Attrs {
		if a.Name.Space == "" && a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

// element is the interface's XML again, for libvirtxml.
func (l *liteIface) element() string {
	var b strings.Builder
	b.WriteString("<interface")
	for _, a := range l.Attrs {
		if a.Name.Space != "" {
			continue
		}
		b.WriteString(" " + a.Name.Local + `="`)
		xml.EscapeText(&b, []byte(a.Value))
		b.WriteString(`"`)
	}
	b.WriteString(">" + l.Inner + "</interface>")
	return b.String()
}

// ParsePlan reads a domain XML and decides, with the host config, which
// interfaces the hook manages and how. Only what netctl manages is
// checked: an interface it does not manage, whatever it holds, and a
// domain with nothing for netctl (then the plan has no interfaces and no
// error) pass untouched. It touches nothing on the host except reading
// the user database for a named tap owner. Every error wraps
// errs.ErrInvalid and says which element is wrong.
func ParsePlan(domainXML []byte, cfg *Config) (*Plan, error) {
	if len(domainXML) > MaxXML {
		return nil, fmt.Errorf("domain XML over %d bytes: %w", MaxXML, errs.ErrInvalid)
	}
	var d liteDomain
	if err := xml.Unmarshal(domainXML, &d); err != nil {
		return nil, &unreadableError{"domain XML: " + oneLine(err.Error())}
	}
	if d.XMLName.Local != "domain" {
		return nil, &unreadableError{fmt.Sprintf("domain XML: the root is <%s>, not <domain>", clip(d.XMLName.Local))}
	}
	p := &Plan{Domain: d.Name, UUID: d.UUID, Type: d.Type}
	if d.OS != nil && len(d.OS.Type.Machine) <= 64 {
		p.Machine = d.OS.Type.Machine
	}
	var meta map[string]*metaEntry
	if d.Metadata != nil {
		var err error
		if meta, err = parseMetadata(d.Metadata.XML); err != nil {
			return nil, err
		}
	}
	var ifaces []liteIface
	if d.Devices != nil {
		ifaces = d.Devices.Interfaces
	}
	// Which interfaces are netctl's, looking at nothing else.
	var mine []int
	for i := range ifaces {
		if managed(&ifaces[i], meta, cfg) {
			mine = append(mine, i)
		}
	}
	if len(mine) == 0 && len(meta) == 0 {
		return p, nil
	}
	if d.Name == "" {
		return nil, fmt.Errorf("domain XML has no <name>: %w", errs.ErrInvalid)
	}
	if err := state.CheckDomainName(d.Name); err != nil {
		return nil, fmt.Errorf("domain XML: <name>: %w", err)
	}
	if len(d.UUID) > 64 {
		return nil, fmt.Errorf("domain %s: <uuid> of %d bytes: %w", d.Name, len(d.UUID), errs.ErrInvalid)
	}
	if len(mine) > MaxInterfaces {
		return nil, fmt.Errorf("domain %s has %d interfaces for netctl; the hook handles at most %d: %w", d.Name, len(mine), MaxInterfaces, errs.ErrInvalid)
	}
	aliases := netAliases(ifaces)
	owner, err := ownerOf(&d, cfg)
	if err != nil {
		return nil, err
	}
	p.Owner = owner
	used := map[string]bool{}
	for _, i := range mine {
		var x libvirtxml.DomainInterface
		if err := x.Unmarshal(ifaces[i].element()); err != nil {
			return nil, fmt.Errorf("domain %s: interface %s: %v: %w", d.Name, ifaceName(liteMAC(&ifaces[i]), i), oneLine(err.Error()), errs.ErrInvalid)
		}
		it, err := planInterface(&x, i, meta, used, cfg)
		if err != nil {
			return nil, fmt.Errorf("domain %s: %w", d.Name, err)
		}
		if it == nil {
			continue
		}
		if it.Force, err = parseForced(x.Driver, ifaceName(it.MAC, i)); err != nil {
			return nil, fmt.Errorf("domain %s: %w", d.Name, err)
		}
		it.Alias = aliases[i]
		it.Pinned = overridesOff(d.Override, it.Alias)
		if x.Driver != nil && x.Driver.EventIDX == "off" {
			it.Pinned |= virtio.EventIdx
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

// netAliases is each interface's device alias: its <alias name>, else
// the one libvirt gives it when the domain starts (a definition has none
// but user aliases; any XML without them is read the same way):
// qemuAssignDeviceNetAlias (src/qemu/qemu_alias.c)
// gives each interface without one "net" and one more than the highest
// netN any interface has, in order; a type='hostdev' interface gets a
// hostdevN alias instead, which no <qemu:override> for a virtio NIC names.
func netAliases(ifaces []liteIface) []string {
	out := make([]string, len(ifaces))
	next := 0
	for i := range ifaces {
		if a := ifaces[i].Alias; a != nil {
			if n, ok := strings.CutPrefix(a.Name, "net"); ok {
				if v, err := strconv.Atoi(n); err == nil && v >= 0 && v < 1<<20 && v+1 > next {
					next = v + 1
				}
			}
		}
	}
	for i := range ifaces {
		switch {
		case ifaces[i].Alias != nil && ifaces[i].Alias.Name != "":
			out[i] = ifaces[i].Alias.Name
		case ifaces[i].attr("type") == "hostdev":
		default:
			out[i] = fmt.Sprintf("net%d", next)
			next++
		}
	}
	return out
}

// unreadableError is XML that is not a domain the hook can read at all;
// it wraps errs.ErrInvalid.
type unreadableError struct{ msg string }

func (e *unreadableError) Error() string { return e.msg + ": " + errs.ErrInvalid.Error() }
func (e *unreadableError) Unwrap() error { return errs.ErrInvalid }

// liteMAC is the interface's MAC when it has a valid one.
func liteMAC(l *liteIface) net.HardwareAddr {
	if l.MAC == nil {
		return nil
	}
	m, err := net.ParseMAC(l.MAC.Address)
	if err != nil || len(m) != 6 {
		return nil
	}
	return m
}

// managed says whether netctl manages interface l: netctl's metadata
// lists its MAC, or it is a vdpa interface on the vdpa directory netctl
// publishes in, or the config says manage "all" and it is an ethernet
// interface with <target managed='no'/> or a direct one.
func managed(l *liteIface, meta map[string]*metaEntry, cfg *Config) bool {
	if m := liteMAC(l); m != nil && meta[m.String()] != nil {
		return true
	}
	switch l.attr("type") {
	case "vdpa":
		return l.Source != nil && filepath.Dir(l.Source.Dev) == cfg.VDPADir
	case "ethernet":
		return (cfg.Manage == ManageAll || l.Alias != nil && strings.HasPrefix(l.Alias.Name, AttachAliasPrefix)) &&
			l.Target != nil && l.Target.Managed == "no"
	case "direct":
		return cfg.Manage == ManageAll
	}
	return false
}

type metaEntry struct {
	metaIface
	seen bool
}

func parseMetadata(md string) (map[string]*metaEntry, error) {
	out := map[string]*metaEntry{}
	if !strings.Contains(md, Namespace) {
		return out, nil
	}
	dec := xml.NewDecoder(strings.NewReader(md))
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
		attached := x.Alias != nil && strings.HasPrefix(x.Alias.Name, AttachAliasPrefix)
		if !listed && !attached && cfg.Manage != ManageAll {
			return nil, nil
		}
		it.Attached = attached && !listed && cfg.Manage != ManageAll
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

// NoOwner is Plan.Owner when the taps get no owner (TUNSETOWNER is not
// set): only root (CAP_NET_ADMIN) can then attach queues to them, which
// is all libvirt needs in system mode (libvirtd opens the tap as root and
// hands QEMU the fds). An owner would let any process of that uid add
// queues to the tap, or take a single-queue tap before QEMU does.
const NoOwner = hostnic.NoOwner

// TapOwnerSeclabel is the tap_owner value that gives each domain's taps
// to the user of its DAC seclabel (what QEMU runs as).
const TapOwnerSeclabel = "seclabel"

func ownerOf(d *liteDomain, cfg *Config) (int, error) {
	switch cfg.TapOwner {
	case "":
		return NoOwner, nil
	case TapOwnerSeclabel:
		for _, s := range d.SecLabel {
			if s.Model == "dac" && s.Label != "" && s.Type != "none" {
				uid, err := lookupUser(dacUser(s.Label))
				if err != nil {
					return 0, fmt.Errorf("domain %s: DAC seclabel %q: %w", d.Name, clip(s.Label), err)
				}
				return uid, nil
			}
		}
		return NoOwner, nil
	}
	return lookupUser(cfg.TapOwner)
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

// vdpaNameOK is the rule for a vdpa device's name netctl touches.
var vdpaNameOK = hostnic.ValidVDPAName

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
