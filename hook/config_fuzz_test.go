package hook

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/internal/fuzzalloc"
)

// FuzzParseConfig: the host config (/etc/netctl/hook.json) is outside
// input. Seeds: the configs the hook ran with against a real libvirtd
// (test/libvirtd's host test wrote {"timeout": "20s"}, hook's libvirtd VM
// test {"log": "-"}), docs/hook.md's example of every field, and broken
// ones. Any bytes give a config or one error wrapping ErrInvalid, never a
// panic; allocation is bounded by the input; a config encodes and parses
// back to the same config.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		`{"timeout": "20s"}`,
		`{"log": "-"}`,
		`{"manage": "all", "mgmtdev": "vduse", "tap_owner": "0", "timeout": "30s", "log": "/var/log/netctl/hook.log", "vdpa_dir": "/run/netctl/vdpa"}`,
		`{"manage": "listed", "mgmtdev": "pci/0000:65:00.2"}`,
		`{"manage":"some"}`, `{"timeout":"1h"}`, `{"vdpa_dir":"/a/../b"}`, `{"unknown":1}`, `[]`, `{} {}`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var c *Config
		var err error
		fuzzalloc.Check(t, len(b), func() { c, err = ParseConfig(b) })
		if err != nil {
			if c != nil || !errors.Is(err, errs.ErrInvalid) || strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("%q: %v (config %+v): want one error wrapping ErrInvalid", b, err, c)
			}
			return
		}
		if len(b) > MaxConfigSize {
			t.Fatalf("took %d bytes, more than %d", len(b), MaxConfigSize)
		}
		if c.TimeoutOrDefault() <= 0 || c.TimeoutOrDefault() > 10*60e9 {
			t.Fatalf("timeout %v", c.TimeoutOrDefault())
		}
		enc, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		c2, err := ParseConfig(enc)
		if err != nil || !reflect.DeepEqual(c, c2) {
			t.Fatalf("round trip: %+v -> %s -> %+v, %v", c, enc, c2, err)
		}
	})
}
