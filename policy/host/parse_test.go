package host

import (
	"errors"
	"strings"
	"testing"
)

// TestParseQEMUVersion: plan decides which QEMU properties a host has by
// its qemu.version; a version that does not read as MAJOR.MINOR[.MICRO]
// would pass as "unknown" without a word, and plan would then print
// properties (guest_uso4=off) that an old QEMU refuses to start with. Such
// a document is refused, naming the field.
func TestParseQEMUVersion(t *testing.T) {
	doc := func(v string) []byte {
		return []byte(`{"schema":"netctl.probe/v1","hostname":"h","kernel":"6.1","qemu":{"version":"` + v + `"}}`)
	}
	for _, v := range []string{"", "7.2.22", "8.2", "10.0.0"} {
		if _, err := Parse(doc(v)); err != nil {
			t.Errorf("qemu.version %q: %v", v, err)
		}
	}
	for _, v := range []string{"junk", "9", "+9.1", "7.2.22 (Debian)", "7..2", "7.2.", "1.2.3.4", "1234567.0"} {
		_, err := Parse(doc(v))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "qemu.version") || !strings.Contains(err.Error(), "MAJOR.MINOR[.MICRO]") {
			t.Errorf("qemu.version %q: %v, want ErrInvalid naming qemu.version and MAJOR.MINOR[.MICRO]", v, err)
		}
	}
}

// TestParseVDPAMigration: a vdpa device's migration answer comes from
// another host's probe and is printed by netctl plan: a reason that is
// too long or not printable (a terminal escape), or facts whose words do
// not parse, are refused, naming the field; a well-formed one is kept.
func TestParseVDPAMigration(t *testing.T) {
	doc := func(m string) []byte {
		return []byte(`{"schema":"netctl.probe/v1","hostname":"h","kernel":"6.12","vdpa":{"available":true,"mgmtdevs":[],` +
			`"devices":[{"name":"v0","driver":"vhost_vdpa","migration":` + m + `}]}}`)
	}
	good := `{"ok":false,"reason":"QEMU 7.2.22 ...","suspend":false,"facts":{"backend_features":"0xe","features":"0x300030028","vqs":2,"groups":1,"address_spaces":1}}`
	d, err := Parse(doc(good))
	if err != nil {
		t.Fatal(err)
	}
	if m := d.VDPA.Devices[0].Migration; m == nil || m.Reason != "QEMU 7.2.22 ..." || m.Facts == nil || m.Facts.Groups != 1 {
		t.Errorf("migration %+v", m)
	}
	for field, m := range map[string]string{
		"migration.reason":                 `{"ok":true,"reason":"` + strings.Repeat("x", 3000) + `"}`,
		"migration.reason ":                `{"ok":true,"reason":"\u001b[2J"}`,
		"migration.facts.backend_features": `{"ok":true,"reason":"r","facts":{"backend_features":"14","features":"0x1"}}`,
		"migration.facts.features":         `{"ok":true,"reason":"r","facts":{"backend_features":"0xe","features":"0x12345678901234567"}}`,
		"migration.facts.group_error":      `{"ok":true,"reason":"r","facts":{"backend_features":"0xe","features":"0x1","group_error":"\u0007"}}`,
	} {
		_, err := Parse(doc(m))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), strings.TrimSpace(field)) {
			t.Errorf("%s: %v, want ErrInvalid naming it", field, err)
		}
	}
}
