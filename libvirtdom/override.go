package libvirtdom

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strings"

	"libvirt.org/go/libvirtxml"

	"github.com/netctl/netctl/internal/errs"
)

// QEMUNamespace is libvirt's namespace for QEMU passthrough in a domain
// (<qemu:override>, libvirt 8.2+; formatdomain.rst "QEMU command-line
// passthrough").
const QEMUNamespace = "http://libvirt.org/schemas/domain/qemu/1.0"

// UserAliasPrefix starts every alias libvirt keeps in a definition (a
// user alias, libvirt 3.9+); an alias the user did not give is made when
// the domain starts and can move when interfaces are added.
const UserAliasPrefix = "ua-"

// OverrideChange is one interface Override wrote properties for, or
// left alone because the domain's own <qemu:override> says otherwise.
type OverrideChange struct {
	MAC   string
	Alias string // the interface's alias the override names
	Added bool   // Override gave the interface that alias
	// Props are the properties written; empty when Added alone: the
	// domain's <qemu:override> sets them all on that alias already, and
	// no device had it.
	Props map[string]bool
	// Kept says why nothing was written for the interface: the domain's
	// own <qemu:override> sets a wanted property otherwise ("" when
	// Props were written).
	Kept string
}

// maxOverrideProps bounds the <qemu:property> elements Override reads.
const maxOverrideProps = 4096

// Override writes, for chosen interfaces of the definition domainXML,
// QEMU properties that libvirt's <driver> cannot set, as
// <qemu:override><qemu:device alias=...><qemu:frontend><qemu:property
// type='bool'> (libvirt 8.2+, applied when QEMU starts, never on a
// hotplug), and leaves every other byte as it is. want is called with
// each <devices><interface> libvirtxml can read and returns the
// properties to set (nil: leave it alone). The override names the
// interface's user alias; one without gets <alias name='ua-netctl-MAC'/>
// (an alias libvirt makes at start, net0, moves when an interface is
// added before it). The QEMU namespace is declared on <domain> when it
// is not. A property the domain's <qemu:override> already sets to the
// wanted value is not written again; one it sets otherwise keeps that
// interface as it is (OverrideChange.Kept): netctl does not rewrite the
// user's override. An interface without an alias gets ua-netctl-MAC also
// when the override on it is there already (no device had the alias, so
// it applied to nothing). The result is read again as libvirt reads it
// (namespaces resolved): what does not read back as reported is an
// error. Errors wrap errs.ErrInvalid: input over MaxXML, not a
// well-formed <domain>, a chosen interface without a MAC, or with an
// alias libvirt does not keep in a definition (so not a definition).
func Override(domainXML []byte, want func(x *libvirtxml.DomainInterface) map[string]bool) ([]byte, []OverrideChange, error) {
	if len(domainXML) > MaxXML {
		return nil, nil, fmt.Errorf("domain XML of %d bytes, over %d: %w", len(domainXML), MaxXML, errs.ErrInvalid)
	}
	doc, err := scanDoc(domainXML)
	if err != nil {
		return nil, nil, err
	}
	ifaces, err := interfaceSpans(domainXML)
	if err != nil {
		return nil, nil, err
	}
	type insert struct {
		at   int
		text string
	}
	var ins []insert
	var changes []OverrideChange
	var devices []string                   // new <qemu:device> elements, at the indentation of a child of <domain>'s child
	wanted := map[string]map[string]bool{} // alias -> the properties that must read back on it
	prefix := doc.qemuPrefix
	if prefix == "" {
		if doc.qemuTaken {
			return nil, nil, fmt.Errorf("domain XML: its <domain> binds prefix qemu to another namespace than libvirt's %s: %w", QEMUNamespace, errs.ErrInvalid)
		}
		prefix = "qemu"
	}
	for _, s := range ifaces {
		x, err := parseInterface(domainXML[s.start:s.end])
		if err != nil {
			continue // what netctl cannot read it does not touch
		}
		props := want(x)
		if len(props) == 0 {
			continue
		}
		if x.MAC == nil {
			return nil, nil, fmt.Errorf("an interface without <mac address>: netctl cannot name it: %w", errs.ErrInvalid)
		}
		mac, err := net.ParseMAC(x.MAC.Address)
		if err != nil || len(mac) != 6 {
			return nil, nil, fmt.Errorf("interface MAC %q: %w", clip(x.MAC.Address), errs.ErrInvalid)
		}
		ch := OverrideChange{MAC: mac.String(), Alias: Alias(x)}
		switch {
		case ch.Alias == "":
			ch.Alias, ch.Added = UserAliasPrefix+"netctl-"+strings.ReplaceAll(mac.String(), ":", ""), true
			if doc.aliases[ch.Alias] {
				return nil, nil, fmt.Errorf("interface %s: alias %s, which netctl would give it, is another device's: %w", mac, ch.Alias, errs.ErrInvalid)
			}
			if s.closeStart < 0 {
				return nil, nil, fmt.Errorf("interface %s is written <interface .../> with nothing inside: %w", mac, errs.ErrInvalid)
			}
		case !strings.HasPrefix(ch.Alias, UserAliasPrefix):
			return nil, nil, fmt.Errorf("interface %s has alias %s, which libvirt makes when the domain starts and does not keep in a definition: "+
				"give netctl the persistent definition (virsh dumpxml --inactive): %w", mac, clip(ch.Alias), errs.ErrInvalid)
		}
		have := doc.props[ch.Alias]
		ch.Props = map[string]bool{}
		for _, p := range slices.Sorted(maps.Keys(props)) {
			h, ok := have[p]
			switch {
			case !ok:
				ch.Props[p] = props[p]
			case h.typ != "bool" || h.value != boolText(props[p]):
				ch.Kept = fmt.Sprintf("the domain's own <qemu:override> sets %s (type %s, value %s) on alias %s; netctl does not rewrite it: set %s to %s there by hand",
					clip(p), clip(h.typ), clip(h.value), clip(ch.Alias), p, boolText(props[p]))
			}
		}
		if ch.Kept != "" {
			ch.Props = nil
			changes = append(changes, ch)
			continue
		}
		if len(ch.Props) == 0 && !ch.Added {
			continue // set already
		}
		wanted[ch.Alias] = props
		if ch.Added {
			// Also when the override is there already: one naming
			// ua-netctl-MAC while no device has that alias (an earlier
			// pin's, kept when the interface was removed and added
			// again) applies to nothing until the interface has it.
			doc.aliases[ch.Alias] = true
			ins = append(ins, insert{s.closeStart, "  <alias name='" + ch.Alias + "'/>" + s.indent})
		}
		if len(ch.Props) == 0 {
			changes = append(changes, ch)
			continue
		}
		var d strings.Builder
		fmt.Fprintf(&d, "<%s:device alias='%s'>\n      <%s:frontend>\n", prefix, xmlAttr(ch.Alias), prefix)
		for _, p := range slices.Sorted(maps.Keys(ch.Props)) {
			fmt.Fprintf(&d, "        <%s:property name='%s' type='bool' value='%s'/>\n", prefix, xmlAttr(p), boolText(ch.Props[p]))
		}
		fmt.Fprintf(&d, "      </%s:frontend>\n    </%s:device>", prefix, prefix)
		devices = append(devices, d.String())
		changes = append(changes, ch)
	}
	if len(devices) > 0 {
		if doc.qemuPrefix == "" {
			ins = append(ins, insert{doc.rootAttrAt, fmt.Sprintf(" xmlns:%s='%s'", prefix, QEMUNamespace)})
		}
		if doc.override >= 0 {
			// Into the domain's own <qemu:override>, before its end tag.
			var t strings.Builder
			for _, d := range devices {
				t.WriteString("  " + d + "\n  ")
			}
			ins = append(ins, insert{doc.override, t.String()})
		} else {
			t := "  <" + prefix + ":override>\n"
			for _, d := range devices {
				t += "    " + d + "\n"
			}
			t += "  </" + prefix + ":override>\n"
			ins = append(ins, insert{doc.rootClose, t})
		}
	}
	slices.SortStableFunc(ins, func(a, b insert) int { return a.at - b.at })
	var buf bytes.Buffer
	prev := 0
	for _, in := range ins {
		buf.Write(domainXML[prev:in.at])
		buf.WriteString(in.text)
		prev = in.at
	}
	buf.Write(domainXML[prev:])
	if err := readsBack(buf.Bytes(), changes, wanted); err != nil {
		return nil, nil, err
	}
	return buf.Bytes(), changes, nil
}

// readsBack checks that out, Override's result, says what changes
// report, as libvirt reads it (the QEMU namespace resolved in every
// scope): each interface changed has its alias, and the <qemu:override>
// properties on that alias are the wanted ones. A prefix the domain binds
// otherwise inside its own <qemu:override> would put what Override wrote
// where libvirt reads nothing, and define would drop it without a word.
func readsBack(out []byte, changes []OverrideChange, wanted map[string]map[string]bool) error {
	if len(wanted) == 0 {
		return nil
	}
	doc, err := scanDoc(out)
	if err != nil {
		return fmt.Errorf("netctl's own override does not read back: %w", err)
	}
	ifaces, err := interfaceSpans(out)
	if err != nil {
		return fmt.Errorf("netctl's own override does not read back: %w", err)
	}
	has := map[string]bool{} // "MAC alias" of every interface
	for _, s := range ifaces {
		x, err := parseInterface(out[s.start:s.end])
		if err != nil || x.MAC == nil {
			continue
		}
		if m, err := net.ParseMAC(x.MAC.Address); err == nil && Alias(x) != "" {
			has[m.String()+" "+Alias(x)] = true
		}
	}
	for _, ch := range changes {
		props, ok := wanted[ch.Alias]
		if !ok || ch.Kept != "" {
			continue
		}
		if !has[ch.MAC+" "+ch.Alias] {
			return fmt.Errorf("interface %s does not read back with alias %s after netctl's edit: set its <qemu:override> by hand (virsh edit): %w", ch.MAC, clip(ch.Alias), errs.ErrInvalid)
		}
		for p, v := range props {
			if h, ok := doc.props[ch.Alias][p]; !ok || h.typ != "bool" || h.value != boolText(v) {
				return fmt.Errorf("interface %s: the <qemu:override> property %s=%s netctl writes on alias %s does not read back in libvirt's namespace "+
					"(does the domain bind a prefix to another namespace inside its own <qemu:override>?): set it by hand (virsh edit): %w",
					ch.MAC, clip(p), boolText(v), clip(ch.Alias), errs.ErrInvalid)
			}
		}
	}
	return nil
}

func boolText(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// xmlAttr escapes s for an attribute in single quotes.
func xmlAttr(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return strings.ReplaceAll(b.String(), "'", "&#39;")
}

// overrideProp is one <qemu:property> of the domain's own overrides.
type overrideProp struct{ typ, value string }

// docScan is what Override needs of a whole domain document.
type docScan struct {
	rootAttrAt int    // where an attribute goes in <domain ...>: before its '>'
	rootClose  int    // the start of </domain>
	qemuPrefix string // the prefix <domain> binds to QEMUNamespace ("" none)
	qemuTaken  bool   // <domain> binds prefix qemu to another namespace
	// override is the start of the end tag of the first
	// <qemu:override> child of <domain> written with a start and an end
	// tag, -1 when none.
	override int
	aliases  map[string]bool                    // every <alias name> in the document
	props    map[string]map[string]overrideProp // alias -> property -> its override
}

// scanDoc reads domainXML for Override.
func scanDoc(b []byte) (*docScan, error) {
	d := &docScan{override: -1, rootClose: -1, aliases: map[string]bool{}, props: map[string]map[string]overrideProp{}}
	dec := xml.NewDecoder(bytes.NewReader(b))
	bad := func(err error) error {
		return fmt.Errorf("domain XML: %s: %w", clip(err.Error()), errs.ErrInvalid)
	}
	var path []xml.Name
	device, nprops := "", 0
	inFrontend := false
	for {
		off := int(dec.InputOffset())
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, bad(err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if len(path) == 0 {
				if t.Name.Local != "domain" || d.rootAttrAt != 0 {
					return nil, fmt.Errorf("domain XML: the root is <%s>, not one <domain>: %w", clip(t.Name.Local), errs.ErrInvalid)
				}
				end := int(dec.InputOffset())
				d.rootAttrAt = end - 1
				if end >= 2 && b[end-2] == '/' {
					return nil, fmt.Errorf("domain XML: an empty <domain/>: %w", errs.ErrInvalid)
				}
				for _, a := range t.Attr {
					if a.Name.Space != "xmlns" {
						continue
					}
					if a.Value == QEMUNamespace && d.qemuPrefix == "" {
						d.qemuPrefix = a.Name.Local
					} else if a.Name.Local == "qemu" && a.Value != QEMUNamespace {
						d.qemuTaken = true
					}
				}
			}
			if t.Name.Local == "alias" {
				for _, a := range t.Attr {
					if a.Name.Local == "name" && a.Name.Space == "" {
						d.aliases[a.Value] = true
					}
				}
			}
			if t.Name.Space == QEMUNamespace {
				switch {
				case t.Name.Local == "device" && len(path) == 2 && path[1].Space == QEMUNamespace && path[1].Local == "override":
					device = attr(t, "alias")
				case t.Name.Local == "frontend" && device != "" && len(path) == 3:
					inFrontend = true
				case t.Name.Local == "property" && inFrontend && len(path) == 4:
					if nprops++; nprops > maxOverrideProps {
						return nil, fmt.Errorf("domain XML: over %d <qemu:property> elements: %w", maxOverrideProps, errs.ErrInvalid)
					}
					if d.props[device] == nil {
						d.props[device] = map[string]overrideProp{}
					}
					d.props[device][attr(t, "name")] = overrideProp{attr(t, "type"), attr(t, "value")}
				}
			}
			path = append(path, t.Name)
		case xml.EndElement:
			switch {
			case len(path) == 1:
				d.rootClose = off
			case len(path) == 2 && t.Name.Space == QEMUNamespace && t.Name.Local == "override" && d.override < 0:
				if off < int(dec.InputOffset()) && b[off] == '<' && b[off+1] == '/' {
					d.override = off
				}
			case len(path) == 3 && t.Name.Local == "device":
				device = ""
			case len(path) == 4 && t.Name.Local == "frontend":
				inFrontend = false
			}
			path = path[:len(path)-1]
		}
	}
	if d.rootAttrAt == 0 || d.rootClose < 0 {
		return nil, fmt.Errorf("domain XML: no <domain>: %w", errs.ErrInvalid)
	}
	return d, nil
}

func attr(t xml.StartElement, name string) string {
	for _, a := range t.Attr {
		if a.Name.Local == name && a.Name.Space == "" {
			return a.Value
		}
	}
	return ""
}
