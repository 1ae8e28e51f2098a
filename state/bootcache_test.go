package state

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBootCache: a value kept during this boot reads back; one from
// another boot, a file that does not decode (or holds unknown fields), an
// oversized file and a bad name are not used, and nothing panics.
func TestBootCache(t *testing.T) {
	dir := t.TempDir()
	bootIDFile = filepath.Join(dir, "boot_id")
	defer func() { bootIDFile = "/proc/sys/kernel/random/boot_id" }()
	os.WriteFile(bootIDFile, []byte("0f0e0d0c-0b0a-4908-8706-050403020100\n"), 0o644)
	s, err := Open(filepath.Join(dir, "run"))
	if err != nil {
		t.Fatal(err)
	}
	type tap struct{ Offloads []string }
	var got tap
	if ok, err := s.LoadBootCache("tap", &got); ok || err != nil {
		t.Fatalf("nothing kept yet: %v %v", ok, err)
	}
	if err := s.SaveBootCache("tap", tap{[]string{"csum", "tso4"}}); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.LoadBootCache("tap", &got); !ok || err != nil || strings.Join(got.Offloads, " ") != "csum tso4" {
		t.Fatalf("this boot: %v %v %+v", ok, err, got)
	}
	// Another boot: not used.
	os.WriteFile(bootIDFile, []byte("1f0e0d0c-0b0a-4908-8706-050403020100\n"), 0o644)
	if ok, _ := s.LoadBootCache("tap", &tap{}); ok {
		t.Error("a value from another boot was used")
	}
	os.WriteFile(bootIDFile, []byte("0f0e0d0c-0b0a-4908-8706-050403020100\n"), 0o644)
	path := filepath.Join(s.Dir, "cache", "tap.json")
	for name, body := range map[string]string{
		"unknown field": `{"boot_id":"0f0e0d0c-0b0a-4908-8706-050403020100","value":{"Offloads":["csum"],"x":1}}`,
		"not JSON":      `{"boot_id":`,
		"wrong type":    `{"boot_id":"0f0e0d0c-0b0a-4908-8706-050403020100","value":{"Offloads":"csum"}}`,
		"oversized":     `{"boot_id":"0f0e0d0c-0b0a-4908-8706-050403020100","value":{"Offloads":["` + strings.Repeat("a", MaxBootCache) + `"]}}`,
	} {
		os.WriteFile(path, []byte(body), 0o600)
		if ok, err := s.LoadBootCache("tap", &tap{}); ok || err != nil {
			t.Errorf("%s: used (%v) or an error (%v)", name, ok, err)
		}
	}
	if _, err := s.LoadBootCache("../x", &tap{}); err == nil {
		t.Error("a name with a path in it was accepted")
	}
	// A boot id that is not a UUID is an error, not a match.
	os.WriteFile(bootIDFile, []byte("garbage"), 0o644)
	if _, err := s.LoadBootCache("tap", &tap{}); err == nil {
		t.Error("a malformed boot id was accepted")
	}
}
