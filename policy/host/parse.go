package host

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"

	"github.com/netctl/netctl/internal/errs"
)

// ErrInvalid is returned (wrapped) for a document that is not a valid
// host description.
var ErrInvalid = errs.ErrInvalid

// MaxDocument bounds a description read from outside: real ones are a few
// KiB, so a larger input is refused before it is decoded.
const MaxDocument = 1 << 20

// Parse reads a description written by netctl probe -j. It refuses, with an
// error that wraps ErrInvalid, anything larger than MaxDocument, anything
// that is not one JSON object, a missing or unknown schema, and a missing
// or malformed hostname or kernel.
func Parse(b []byte) (*Description, error) {
	if len(b) > MaxDocument {
		return nil, fmt.Errorf("%d bytes, more than a probe document's %d: %w", len(b), MaxDocument, ErrInvalid)
	}
	if t := bytes.TrimSpace(b); len(t) == 0 || t[0] != '{' {
		return nil, fmt.Errorf("not a JSON object, so not netctl probe -j output: %w", ErrInvalid)
	}
	var d Description
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("not netctl probe -j output: %w (%w)", err, ErrInvalid)
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return &d, nil
}

// Validate checks what Parse checks after decoding.
func (d *Description) Validate() error {
	switch d.Schema {
	case Schema:
	case "":
		return fmt.Errorf("no \"schema\" field, so not a netctl probe document (netctl probe -j writes \"schema\": %q; rerun it with this netctl): %w", Schema, ErrInvalid)
	default:
		return fmt.Errorf("schema %.64q: this netctl reads %q: %w", d.Schema, Schema, ErrInvalid)
	}
	if err := checkName("hostname", d.Hostname, 253); err != nil {
		return err
	}
	if d.Hostname == "(none)" {
		return fmt.Errorf("hostname (none): the host had no name when probed; name it (hostname NAME) and probe again, so that hosts can be told apart: %w", ErrInvalid)
	}
	if err := checkName("kernel", d.Kernel, 256); err != nil {
		return err
	}
	for i := range d.VDPA.Devices {
		if m := d.VDPA.Devices[i].Migration; m != nil {
			if err := m.validate(d.VDPA.Devices[i].Name); err != nil {
				return err
			}
		}
	}
	if v := d.QEMU.Version; v != "" && !isVersion(v) {
		return fmt.Errorf("qemu.version %.32q: want MAJOR.MINOR[.MICRO] as netctl probe writes it (\"7.2.22\"), or none: %w", v, ErrInvalid)
	}
	return nil
}

// isVersion reports whether s is MAJOR.MINOR[.MICRO], each part 1 to 6
// decimal digits, as netctl probe writes it and policy reads it.
func isVersion(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return false
	}
	for _, p := range parts {
		if p == "" || len(p) > 6 || strings.Trim(p, "0123456789") != "" {
			return false
		}
	}
	return true
}

// checkName wants a non-empty printable string without spaces of at most
// max bytes.
func checkName(field, s string, max int) error {
	if s == "" {
		return fmt.Errorf("no %q field: %w", field, ErrInvalid)
	}
	if len(s) > max || strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) }) >= 0 {
		return fmt.Errorf("%s %.64q: want up to %d printable characters without spaces: %w", field, s, max, ErrInvalid)
	}
	return nil
}
