package libvirtdom

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"libvirt.org/go/libvirtxml"

	"github.com/netctl/netctl/internal/errs"
)

// MaxXML bounds a domain XML netctl reads from libvirt (the hook's bound).
const MaxXML = 4 << 20

// Domain is a domain as libvirt names it.
type Domain struct {
	Name string
	UUID string // canonical, lower case with dashes
	d    DomainRef
}

// FormatUUID is u in canonical form.
func FormatUUID(u [16]byte) string {
	h := hex.EncodeToString(u[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// ParseUUID reads a UUID as libvirt accepts it (32 hex digits, with or
// without the four dashes); ok is false for anything else.
func ParseUUID(s string) (u [16]byte, ok bool) {
	if len(s) == 36 {
		if s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
			return u, false
		}
		s = strings.ReplaceAll(s, "-", "")
	}
	if len(s) != 32 {
		return u, false
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return u, false
	}
	copy(u[:], b)
	return u, true
}

func domainOf(d DomainRef) Domain {
	return Domain{Name: d.Name, UUID: FormatUUID(d.UUID), d: d}
}

// Lookup finds a domain by name or UUID (like virsh does): a ref that
// reads as a UUID is looked up as one first, then as a name. A domain
// that does not exist wraps os.ErrNotExist.
func (c *Conn) Lookup(ctx context.Context, ref string) (Domain, error) {
	if ref == "" || len(ref) > 1024 {
		return Domain{}, fmt.Errorf("domain %q: give a name or UUID: %w", clip(ref), errs.ErrInvalid)
	}
	if u, ok := ParseUUID(ref); ok {
		var d DomainRef
		err := c.do(ctx, "lookup domain by UUID "+ref, func() (err error) { d, err = c.l.DomainLookupByUUID(u); return })
		if err == nil {
			return domainOf(d), nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return Domain{}, err
		}
	}
	var d DomainRef
	err := c.do(ctx, "lookup domain "+clip(ref), func() (err error) { d, err = c.l.DomainLookupByName(ref); return })
	if errors.Is(err, os.ErrNotExist) {
		return Domain{}, fmt.Errorf("libvirt %s: no domain named %s or with that UUID (virsh list --all shows them): %w", c.URI, clip(ref), os.ErrNotExist)
	}
	if err != nil {
		return Domain{}, err
	}
	return domainOf(d), nil
}

// Running says whether the domain runs (or is paused: it has a QEMU).
func (c *Conn) Running(ctx context.Context, d Domain) (bool, error) {
	var st DomainState
	err := c.do(ctx, "state of "+d.Name, func() (err error) { st, err = c.l.DomainGetState(d.d); return })
	if err != nil {
		return false, err
	}
	switch st {
	case DomainShutoff, DomainNostate, DomainCrashed:
		return false, nil
	}
	return true, nil
}

// XML reads the domain's live definition (what runs), or with inactive
// its persistent one (what the next start uses), as virsh dumpxml
// [--inactive] does. Over MaxXML is an error wrapping errs.ErrInvalid.
func (c *Conn) XML(ctx context.Context, d Domain, inactive bool) ([]byte, error) {
	var flags XMLFlags
	what := "live XML of " + d.Name
	if inactive {
		flags, what = XMLInactive, "persistent XML of "+d.Name
	}
	return c.xmlDesc(ctx, d, flags, what)
}

// Definition reads the domain's persistent definition to define it again,
// as virsh edit does (VIR_DOMAIN_XML_INACTIVE|VIR_DOMAIN_XML_SECURE): with
// what libvirt leaves out of other reads (a <graphics passwd>), which a
// Define of XML's would drop. Read it only to Define it.
func (c *Conn) Definition(ctx context.Context, d Domain) ([]byte, error) {
	return c.xmlDesc(ctx, d, XMLInactive|XMLSecure, "persistent XML of "+d.Name)
}

// Persistent says whether the domain has a persistent definition (one
// started with virsh create has none: it is transient, and a Define
// would make it persistent).
func (c *Conn) Persistent(ctx context.Context, d Domain) (bool, error) {
	var p bool
	err := c.do(ctx, "is "+d.Name+" persistent", func() (err error) { p, err = c.l.DomainIsPersistent(d.d); return })
	return p, err
}

func (c *Conn) xmlDesc(ctx context.Context, d Domain, flags XMLFlags, what string) ([]byte, error) {
	var s string
	if err := c.do(ctx, what, func() (err error) { s, err = c.l.DomainGetXMLDesc(d.d, flags); return }); err != nil {
		return nil, err
	}
	if len(s) > MaxXML {
		return nil, fmt.Errorf("libvirt %s: %s: %d bytes, over %d: %w", c.URI, what, len(s), MaxXML, errs.ErrInvalid)
	}
	return []byte(s), nil
}

// Define writes xml as the domain's persistent definition
// (virDomainDefineXML with VIR_DOMAIN_DEFINE_VALIDATE: libvirt checks it
// against its schema first). A running domain keeps running as it is;
// the next start uses the new definition.
func (c *Conn) Define(ctx context.Context, xml []byte) (Domain, error) {
	if len(xml) > MaxXML {
		return Domain{}, fmt.Errorf("domain XML of %d bytes, over %d: %w", len(xml), MaxXML, errs.ErrInvalid)
	}
	var d DomainRef
	if err := c.do(ctx, "define", func() (err error) {
		d, err = c.l.DomainDefineXMLFlags(string(xml), DefineValidate)
		return
	}); err != nil {
		return Domain{}, err
	}
	return domainOf(d), nil
}

// ParseDomain parses a domain XML from libvirt (or anywhere): bounded by
// MaxXML, and a panic in the parser (libvirtxml on input it did not
// expect) is an error, never a crash. Errors wrap errs.ErrInvalid.
func ParseDomain(b []byte) (d *libvirtxml.Domain, err error) {
	if len(b) > MaxXML {
		return nil, fmt.Errorf("domain XML of %d bytes, over %d: %w", len(b), MaxXML, errs.ErrInvalid)
	}
	defer func() {
		if r := recover(); r != nil {
			d, err = nil, fmt.Errorf("domain XML: the parser failed (%s): %w", clip(fmt.Sprint(r)), errs.ErrInvalid)
		}
	}()
	d = &libvirtxml.Domain{}
	if err := d.Unmarshal(string(b)); err != nil {
		return nil, fmt.Errorf("domain XML: %s: %w", clip(err.Error()), errs.ErrInvalid)
	}
	return d, nil
}
