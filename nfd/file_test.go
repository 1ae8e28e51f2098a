package nfd

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/errs"
)

// parseFeatureFile reads a feature file as nfd-worker's local source does
// (source/local/local.go parseFeatureFile): lines trimmed, # comments, "#
// +expiry-time=" directives applying to the lines after them, name=value
// or name alone (true). Lines after an expiry before now are dropped.
func parseFeatureFile(t *testing.T, b []byte, now time.Time) map[string]string {
	t.Helper()
	if len(b) > MaxFileSize {
		return nil // ignored whole
	}
	out := map[string]string{}
	expiry := now
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "":
		case strings.HasPrefix(l, "# +"):
			if v, ok := strings.CutPrefix(l, "# +expiry-time="); ok {
				e, err := time.Parse(time.RFC3339, strings.TrimSpace(v))
				if err != nil {
					t.Fatalf("bad expiry %q", v)
				}
				expiry = e
			}
		case strings.HasPrefix(l, "#"):
		default:
			if expiry.Before(now) {
				continue
			}
			k, v, ok := strings.Cut(l, "=")
			if !ok {
				v = "true"
			}
			out[k] = v
		}
	}
	return out
}

// TestRenderAsNFDReadsIt: the file read back as nfd-worker reads it
// gives the labels until the expiry, none after.
func TestRenderAsNFDReadsIt(t *testing.T) {
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	ls := []Label{{"vhost-net", "true"}, {"featureset", "fs-13000ff83"}}
	b, err := Render(ls, now.Add(time.Hour), now)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", b)
	got := parseFeatureFile(t, b, now.Add(59*time.Minute))
	if len(got) != 2 || got["netctl.dev/vhost-net"] != "true" || got["netctl.dev/featureset"] != "fs-13000ff83" {
		t.Errorf("read back before the expiry: %v", got)
	}
	if got := parseFeatureFile(t, b, now.Add(61*time.Minute)); len(got) != 0 {
		t.Errorf("read back after the expiry: %v", got)
	}
	if _, err := Render([]Label{{"x", "@local.label.y"}}, time.Time{}, now); !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("a value starting with @: %v", err)
	}
	var many []Label
	for i := 0; i < 3000; i++ {
		many = append(many, Label{strings.Repeat("n", 40), "true"})
	}
	if _, err := Render(many, time.Time{}, now); !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "65536") {
		t.Errorf("a file over 64 KiB: %v", err)
	}
}

// TestWriteAtomic: Write replaces the file whole through a dot-file
// (nothing else is left in the directory), makes the directory, and
// refuses a FileName that is a symlink or a directory, leaving it and
// its target alone.
func TestWriteAtomic(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "features.d")
	for _, c := range []string{"one\n", "two\n"} {
		if err := Write(dir, []byte(c)); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, FileName))
		if err != nil || string(b) != c {
			t.Fatalf("read %q, %v; want %q", b, err, c)
		}
		ents, _ := os.ReadDir(dir)
		if len(ents) != 1 {
			t.Errorf("the directory holds %v, want only %s", ents, FileName)
		}
	}
	// A stale dot-file (a crash between create and rename) goes; a fresh
	// one (another writer's, live) stays.
	stale := filepath.Join(dir, "."+FileName+".tmp-"+itoa(os.Getpid())+"-0011223344556677")
	fresh := filepath.Join(dir, "."+FileName+".tmp-1-8899aabbccddeeff")
	os.WriteFile(stale, []byte("stale"), 0o644)
	os.WriteFile(fresh, []byte("fresh"), 0o644)
	old := time.Now().Add(-time.Hour)
	os.Chtimes(stale, old, old)
	if err := Write(dir, []byte("three\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); err == nil {
		t.Errorf("the stale dot-file stayed")
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("a live writer's dot-file was removed: %v", err)
	}
	os.Remove(fresh)
	if err := Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := Remove(dir); err != nil {
		t.Errorf("Remove of a missing file: %v", err)
	}
	// Someone's symlink under netctl's name: refused, left as it is.
	victim := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(victim, []byte("keep"), 0o644)
	if err := os.Symlink(victim, filepath.Join(dir, FileName)); err != nil {
		t.Fatal(err)
	}
	if err := Write(dir, []byte("x\n")); !errors.Is(err, errs.ErrConflict) {
		t.Errorf("Write over a symlink: %v", err)
	}
	if err := Remove(dir); !errors.Is(err, errs.ErrConflict) {
		t.Errorf("Remove of a symlink: %v", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("the symlink's target changed")
	}
	if err := Write("relative/dir", []byte("x")); !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("a relative directory: %v", err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestWritePlantedTemp: whatever another user planted under the name of
// netctl's dot-file of this pid (a non-empty directory, which cannot be
// removed; a symlink) neither stops the write nor is touched; a second
// writer with the same pid (two DaemonSet pods' PID 1 during a rolling
// update) cannot take the other's dot-file either: each write renames
// its own, whole content.
func TestWritePlantedTemp(t *testing.T) {
	dir := t.TempDir()
	planted := filepath.Join(dir, "."+FileName+".tmp-"+itoa(os.Getpid()))
	if err := os.MkdirAll(filepath.Join(planted, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Write(dir, []byte("one\n")); err != nil {
		t.Fatalf("Write beside a planted directory: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, FileName)); string(b) != "one\n" {
		t.Errorf("read %q, want one", b)
	}
	if _, err := os.Stat(filepath.Join(planted, "x")); err != nil {
		t.Errorf("the planted directory was touched: %v", err)
	}
	os.RemoveAll(planted)
	victim := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(victim, []byte("keep"), 0o644)
	if err := os.Symlink(victim, planted); err != nil {
		t.Fatal(err)
	}
	if err := Write(dir, []byte("two\n")); err != nil {
		t.Fatalf("Write beside a planted symlink: %v", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("the symlink's target changed: %q", b)
	}
	if l, err := os.Readlink(planted); err != nil || l != victim {
		t.Errorf("the planted symlink was touched: %q, %v", l, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, FileName)); string(b) != "two\n" {
		t.Errorf("read %q, want two", b)
	}
	os.Remove(planted)
	// Concurrent writers: every read sees one writer's whole content.
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c := strings.Repeat(string(rune('a'+i)), 4000) + "\n"
			for j := 0; j < 50; j++ {
				if err := Write(dir, []byte(c)); err != nil {
					t.Errorf("writer %d: %v", i, err)
					return
				}
			}
		}(i)
	}
	wg.Wait()
	b, _ := os.ReadFile(filepath.Join(dir, FileName))
	if len(b) != 4001 || strings.Count(string(b), string(b[:1])) != 4000 {
		t.Errorf("after concurrent writes the file is %d bytes, mixed: %.40q", len(b), b)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("left in the directory: %v", ents)
	}
}
