package cni

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParseConfig: from the NAD samples, any input is a Config or a
// ConfigError with a message, never a panic.
func FuzzParseConfig(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "nad", "*.json"))
	if len(files) == 0 {
		f.Fatal("no samples in testdata/nad")
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConfig(b)
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Msg == "" || ce.Code == 0 {
				t.Fatalf("%v: not a ConfigError with a code and message", err)
			}
			return
		}
		if c.Queues < 1 || c.Queues > 256 || c.Name == "" || c.CNIVersion == "" || c.Kind == "" {
			t.Fatalf("accepted out of range: %+v", c)
		}
	})
}
