package libvirtdom

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"slices"
	"strings"

	"libvirt.org/go/libvirtxml"

	"github.com/netctl/netctl/internal/errs"
)

// Change is one interface Pin rewrote: its MAC and its <driver> element
// before ("" when it had none) and after.
type Change struct {
	MAC, Before, After string

	written string // the bytes put where Before was (After, with indentation when inserted)
}

// Pin rewrites the <driver> element of chosen interfaces of domainXML and
// leaves every other byte as it is: pin is called with each
// <devices><interface> (parsed by libvirtxml) and returns the driver to
// write, or nil to leave the interface alone. An interface without a
// <driver> gets one before its </interface>. Pin parses nothing else
// with libvirtxml, so an element it does not know cannot be lost; an
// interface libvirtxml cannot read is passed by (pin is not called for
// it). An unchanged driver is no Change. Input over MaxXML, a document
// that is not well-formed or not a <domain>, and a chosen interface
// written as <interface .../> are errors wrapping errs.ErrInvalid.
func Pin(domainXML []byte, pin func(x *libvirtxml.DomainInterface) *libvirtxml.DomainInterfaceDriver) (out []byte, changes []Change, err error) {
	if len(domainXML) > MaxXML {
		return nil, nil, fmt.Errorf("domain XML of %d bytes, over %d: %w", len(domainXML), MaxXML, errs.ErrInvalid)
	}
	ifaces, err := interfaceSpans(domainXML)
	if err != nil {
		return nil, nil, err
	}
	type edit struct {
		from, to int
		text     string
	}
	var edits []edit
	for _, s := range ifaces {
		x, err := parseInterface(domainXML[s.start:s.end])
		if err != nil {
			continue // what netctl cannot read it does not touch
		}
		drv := pin(x)
		if drv == nil {
			continue
		}
		text, err := marshalDriver(drv)
		if err != nil {
			return nil, nil, err
		}
		mac := ""
		if x.MAC != nil {
			mac = x.MAC.Address
		}
		switch {
		case s.drvStart >= 0:
			before := string(domainXML[s.drvStart:s.drvEnd])
			if sameDriver(x.Driver, drv) {
				continue
			}
			if lost := lostInDriver(before, x.Driver); lost != "" {
				return nil, nil, fmt.Errorf("interface %s: its <driver> has %s, which netctl's libvirtxml does not know and a pin would drop: "+
					"set its <driver> by hand (virsh edit), or use a netctl built with a newer libvirtxml: %w", clip(mac), clip(lost), errs.ErrInvalid)
			}
			edits = append(edits, edit{s.drvStart, s.drvEnd, text})
			changes = append(changes, Change{MAC: mac, Before: before, After: text, written: text})
		case s.closeStart < 0:
			return nil, nil, fmt.Errorf("interface %s is written <interface .../> with nothing inside: %w", clip(mac), errs.ErrInvalid)
		default:
			w := "  " + text + s.indent
			edits = append(edits, edit{s.closeStart, s.closeStart, w})
			changes = append(changes, Change{MAC: mac, After: text, written: w})
		}
	}
	var buf bytes.Buffer
	prev := 0
	for _, e := range edits { // in document order
		buf.Write(domainXML[prev:e.from])
		buf.WriteString(e.text)
		prev = e.to
	}
	buf.Write(domainXML[prev:])
	return buf.Bytes(), changes, nil
}

// span is where one <devices><interface> lies in a document: the whole
// element, its <driver> child (-1 when none), the start of its end tag
// (-1 for <interface/>) and the whitespace before that end tag.
type span struct {
	start, end       int
	drvStart, drvEnd int
	closeStart       int
	indent           string
}

// interfaceSpans finds the byte ranges of every <domain><devices><interface>.
func interfaceSpans(b []byte) ([]span, error) {
	dec := xml.NewDecoder(bytes.NewReader(b))
	var path []string
	var out []span
	root := false
	bad := func(err error) error {
		return fmt.Errorf("domain XML: %s: %w", clip(err.Error()), errs.ErrInvalid)
	}
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
				if t.Name.Local != "domain" || root {
					return nil, fmt.Errorf("domain XML: the root is <%s>, not one <domain>: %w", clip(t.Name.Local), errs.ErrInvalid)
				}
				root = true
			}
			if len(path) == 2 && path[0] == "domain" && path[1] == "devices" && t.Name.Local == "interface" && t.Name.Space == "" {
				s, err := interfaceSpan(dec, b, off)
				if err != nil {
					return nil, bad(err)
				}
				out = append(out, s)
				continue
			}
			path = append(path, t.Name.Local)
		case xml.EndElement:
			if len(path) > 0 {
				path = path[:len(path)-1]
			}
		}
	}
	if !root {
		return nil, fmt.Errorf("domain XML: no <domain>: %w", errs.ErrInvalid)
	}
	return out, nil
}

// interfaceSpan reads one <interface> whose start tag began at start.
func interfaceSpan(dec *xml.Decoder, b []byte, start int) (span, error) {
	s := span{start: start, drvStart: -1, drvEnd: -1, closeStart: -1}
	for {
		off := int(dec.InputOffset())
		tok, err := dec.Token()
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return s, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if t.Name.Local == "driver" && t.Name.Space == "" && s.drvStart < 0 {
				s.drvStart = off
				if err := dec.Skip(); err != nil {
					return s, err
				}
				s.drvEnd = int(dec.InputOffset())
				continue
			}
			if err := dec.Skip(); err != nil {
				return s, err
			}
		case xml.EndElement:
			s.end = int(dec.InputOffset())
			if off < s.end { // not <interface/>
				s.closeStart = off
				i := off
				for i > start && strings.ContainsRune(" \t\r\n", rune(b[i-1])) {
					i--
				}
				s.indent = string(b[i:off])
			}
			return s, nil
		}
	}
}

// parseInterface parses one <interface> element; a panic in the parser
// is an error.
func parseInterface(b []byte) (x *libvirtxml.DomainInterface, err error) {
	defer func() {
		if r := recover(); r != nil {
			x, err = nil, fmt.Errorf("interface XML: the parser failed (%s): %w", clip(fmt.Sprint(r)), errs.ErrInvalid)
		}
	}()
	x = &libvirtxml.DomainInterface{}
	if err := x.Unmarshal(string(b)); err != nil {
		return nil, fmt.Errorf("interface XML: %s: %w", clip(err.Error()), errs.ErrInvalid)
	}
	return x, nil
}

func marshalDriver(d *libvirtxml.DomainInterfaceDriver) (string, error) {
	var b strings.Builder
	enc := xml.NewEncoder(&b)
	if err := enc.EncodeElement(d, xml.StartElement{Name: xml.Name{Local: "driver"}}); err != nil {
		return "", fmt.Errorf("driver XML: %w", err)
	}
	if err := enc.Flush(); err != nil {
		return "", fmt.Errorf("driver XML: %w", err)
	}
	return b.String(), nil
}

func sameDriver(a, b *libvirtxml.DomainInterfaceDriver) bool {
	if a == nil || b == nil {
		return a == b
	}
	x, err1 := marshalDriver(a)
	y, err2 := marshalDriver(b)
	return err1 == nil && err2 == nil && x == y
}

// Unpin is domainXML with every interface's <driver> stripped of what
// Pin writes (the name, event_idx and the <host/> and <guest/> offload
// attributes but host gso), keeping the rest (queues, txmode, ...): the
// definition to decide on afresh, as if no earlier pin, and no user, had
// chosen a backend or forced an offload. It only feeds a decision; netctl
// never defines it.
func Unpin(domainXML []byte) ([]byte, error) {
	out, _, err := Pin(domainXML, func(x *libvirtxml.DomainInterface) *libvirtxml.DomainInterfaceDriver {
		if x.Driver == nil {
			return nil
		}
		d := *x.Driver
		d.Name, d.EventIDX, d.Guest = "", "", nil
		d.Host = nil
		if x.Driver.Host != nil && x.Driver.Host.GSO != "" {
			d.Host = &libvirtxml.DomainInterfaceDriverHost{GSO: x.Driver.Host.GSO}
		}
		return &d
	})
	return out, err
}

// lostInDriver names the first attribute or element of the <driver>
// text raw that libvirtxml's reading of it (parsed) does not write back,
// "" when it keeps them all: what rewriting that <driver> would drop.
func lostInDriver(raw string, parsed *libvirtxml.DomainInterfaceDriver) string {
	kept := ""
	if parsed != nil {
		var err error
		if kept, err = marshalDriver(parsed); err != nil {
			return "what netctl cannot write back"
		}
	}
	have := xmlPaths(kept)
	for _, p := range xmlPaths(raw) {
		if !slices.Contains(have, p) {
			return p
		}
	}
	return ""
}

// xmlPaths lists every element and attribute of the XML text s as a path
// (driver, driver@queues, driver/host@csum), in document order; at most
// 256 of them.
func xmlPaths(s string) []string {
	dec := xml.NewDecoder(strings.NewReader(s))
	var path, out []string
	for len(out) < 256 {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		switch t := tok.(type) {
		case xml.StartElement:
			path = append(path, t.Name.Local)
			p := strings.Join(path, "/")
			out = append(out, p)
			for _, a := range t.Attr {
				out = append(out, p+"@"+a.Name.Local)
			}
		case xml.EndElement:
			if len(path) > 0 {
				path = path[:len(path)-1]
			}
		}
	}
	return out
}
