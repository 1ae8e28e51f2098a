package host

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/netctl/netctl/internal/fuzzalloc"
)

// seeds are real netctl probe -j output: the 6.12 and 6.1 test VMs and
// this development machine as root and as nobody.
func seeds(f *testing.F) {
	files, err := filepath.Glob("../testdata/probe-*.json")
	if err != nil || len(files) < 4 {
		f.Fatalf("seed corpus: %v, %v", files, err)
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzParse: any bytes give a description or an error wrapping
// ErrInvalid, never a panic; allocation stays proportional to the input;
// a description encodes and decodes to the same encoding.
func FuzzParse(f *testing.F) {
	seeds(f)
	f.Add([]byte(`{"schema":"netctl.probe/v1","hostname":"h","kernel":"6.1","devices":[{"name":"eth0","features":{}}]}`))
	f.Add([]byte(`{"schema":"netctl.probe/v1","hostname":"(none)","kernel":"6.1"}`))
	f.Add([]byte(`{"schema":"netctl.probe/v1","hostname":"h","kernel":"6.12","vdpa":{"available":true,"mgmtdevs":[],"devices":[{"name":"v0",` +
		`"driver":"vhost_vdpa","migration":{"ok":false,"reason":"r","suspend":false,"facts":{"backend_features":"0xe","features":"0x1",` +
		`"vqs":2,"groups":1,"address_spaces":1,"cvq_own_group":true,"group_error":""}}}]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var d *Description
		var err error
		fuzzalloc.Check(t, len(b), func() { d, err = Parse(b) })
		if err != nil {
			if !errors.Is(err, ErrInvalid) || d != nil {
				t.Fatalf("error %v (ErrInvalid: %v) with %v", err, errors.Is(err, ErrInvalid), d)
			}
			return
		}
		if len(b) > MaxDocument {
			t.Fatalf("%d bytes accepted", len(b))
		}
		enc, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		d2, err := Parse(enc)
		if err != nil {
			t.Fatalf("re-parsing %s: %v", enc, err)
		}
		enc2, _ := json.Marshal(d2)
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("round trip changed:\n%s\n%s", enc, enc2)
		}
		d.VhostNet.FeatureWord()
		for _, v := range d.VDPA.Devices {
			v.FeatureWord()
			if m := v.Migration; m != nil && m.Facts != nil {
				if _, ok := Word(m.Facts.BackendFeatures); !ok {
					t.Fatalf("accepted migration facts with backend features %q", m.Facts.BackendFeatures)
				}
			}
		}
	})
}
