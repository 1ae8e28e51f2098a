package libvirtdom

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"libvirt.org/go/libvirtxml"

	"github.com/netctl/netctl/internal/errs"
)

// Replace rewrites chosen <devices><interface> elements of domainXML
// whole, with libvirtxml, and leaves every other byte as it is: replace
// is called with each interface libvirtxml can read and returns the
// interface to write in its place (nil: leave it alone). It is for what
// Pin cannot do, such as turning an interface's type from ethernet into
// vdpa. Before writing, Replace checks that libvirtxml's reading of the
// chosen interface keeps every element and attribute it had, so nothing
// the user wrote inside it is lost; one it would drop is an error. The
// count is how many interfaces were written. Input over MaxXML, a
// document that is not well-formed or not a <domain> are errors wrapping
// errs.ErrInvalid.
func Replace(domainXML []byte, replace func(x *libvirtxml.DomainInterface) *libvirtxml.DomainInterface) ([]byte, int, error) {
	if len(domainXML) > MaxXML {
		return nil, 0, fmt.Errorf("domain XML of %d bytes, over %d: %w", len(domainXML), MaxXML, errs.ErrInvalid)
	}
	ifaces, err := interfaceSpans(domainXML)
	if err != nil {
		return nil, 0, err
	}
	var buf bytes.Buffer
	prev, n := 0, 0
	for _, s := range ifaces {
		raw := domainXML[s.start:s.end]
		x, err := parseInterface(raw)
		if err != nil {
			continue // what netctl cannot read it does not touch
		}
		y := replace(x)
		if y == nil {
			continue
		}
		kept, err := marshalInterface(x)
		if err != nil {
			return nil, 0, err
		}
		have := xmlPaths(kept)
		for _, p := range xmlPaths(string(raw)) {
			if (y.Source != x.Source && under(p, "interface/source")) || (y.Target != x.Target && under(p, "interface/target")) {
				continue // the caller replaced it
			}
			if !slices.Contains(have, p) {
				return nil, 0, fmt.Errorf("an interface has %s, which netctl's libvirtxml does not know and rewriting the interface would drop: %w", clip(p), errs.ErrInvalid)
			}
		}
		text, err := marshalInterface(y)
		if err != nil {
			return nil, 0, err
		}
		// Indent it as the element it replaces.
		i := s.start
		for i > 0 && (domainXML[i-1] == ' ' || domainXML[i-1] == '\t') {
			i--
		}
		buf.Write(domainXML[prev:s.start])
		buf.WriteString(strings.ReplaceAll(text, "\n", "\n"+string(domainXML[i:s.start])))
		prev = s.end
		n++
	}
	buf.Write(domainXML[prev:])
	return buf.Bytes(), n, nil
}

// under says whether path p is element e, one of its attributes or
// something inside it.
func under(p, e string) bool {
	return p == e || strings.HasPrefix(p, e+"/") || strings.HasPrefix(p, e+"@")
}

// marshalInterface writes x as libvirt's <interface>; a panic in the
// writer is an error.
func marshalInterface(x *libvirtxml.DomainInterface) (s string, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = "", fmt.Errorf("interface XML: the writer failed (%s): %w", clip(fmt.Sprint(r)), errs.ErrInvalid)
		}
	}()
	s, err = x.Marshal()
	if err != nil {
		return "", fmt.Errorf("interface XML: %s: %w", clip(err.Error()), errs.ErrInvalid)
	}
	return s, nil
}
