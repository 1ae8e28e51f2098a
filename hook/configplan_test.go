package hook

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/virtio"
)

// TestLoadConfigPlan: the config's "plan" is read with the config, and
// trusted as the config is: it decides what every guest is offered, so a
// plan that someone other than root (or this user) could write or
// replace is refused, like a missing, edited or foreign one; each is a
// config error (LoadConfig fails), which the hook turns into a refusal
// of domains that name netctl only.
func TestLoadConfigPlan(t *testing.T) {
	plan, res := writePlan(t, probeOf(t, "probe-6.1.json", ""), probeOf(t, "probe-6.12.json", ""))
	c, err := LoadConfig(writeConfig(t, `{"plan": "`+plan+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Pool() == nil || c.Pool().ID != res.ID || c.Pool().Offer.Has(virtio.RingReset) {
		t.Fatalf("pool %+v; want the plan's %s", c.Pool(), res.ID)
	}
	if !c.plan.someHost.Has(virtio.RingReset) || !c.plan.someHost.Has(virtio.NetHostUSO) {
		t.Errorf("some host of the plan offers %v; the 6.12 host offers RING_RESET and HOST_USO", c.plan.someHost)
	}
	if DefaultConfig().Pool() != nil || (*Config)(nil).Pool() != nil {
		t.Error("a config without a plan has a pool")
	}
	refused := func(t *testing.T, js string, want ...string) {
		t.Helper()
		_, err := LoadConfig(writeConfig(t, js))
		if err == nil {
			t.Fatalf("LoadConfig(%s) loaded", js)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("not one line: %q", err)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("LoadConfig(%s) = %v; want it to say %q", js, err, w)
			}
		}
	}
	withPlan := func(t *testing.T, b []byte, mode os.FileMode) string {
		t.Helper()
		p := filepath.Join(t.TempDir(), "pool.json")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return `{"plan": "` + p + `"}`
	}
	good, _ := os.ReadFile(plan)
	t.Run("relative", func(t *testing.T) { refused(t, `{"plan": "pool.json"}`, "clean absolute path") })
	t.Run("missing", func(t *testing.T) {
		refused(t, `{"plan": "/nonexistent/pool.json"}`, "does not exist", "netctl plan -j")
	})
	t.Run("world-writable", func(t *testing.T) { refused(t, withPlan(t, good, 0o666), "plan ", "chmod go-w") })
	t.Run("group-writable", func(t *testing.T) { refused(t, withPlan(t, good, 0o664), "chmod go-w") })
	t.Run("edited", func(t *testing.T) {
		refused(t, withPlan(t, bytes.Replace(good, []byte(`"CSUM",`), nil, 1), 0o644), "edited")
	})
	t.Run("not a plan", func(t *testing.T) { refused(t, withPlan(t, []byte(`{"hostname": "h"}`), 0o644), "netctl plan -j") })
	t.Run("directory", func(t *testing.T) { refused(t, `{"plan": "`+t.TempDir()+`"}`, "not a regular file") })
	t.Run("untrusted directory", func(t *testing.T) {
		d := filepath.Join(t.TempDir(), "open")
		if err := os.Mkdir(d, 0o777); err != nil {
			t.Fatal(err)
		}
		os.Chmod(d, 0o777)
		p := filepath.Join(d, "pool.json")
		os.WriteFile(p, good, 0o644)
		_, err := LoadConfig(writeConfig(t, `{"plan": "`+p+`"}`))
		if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "directory "+d) {
			t.Errorf("plan in a directory anyone can write: %v", err)
		}
	})
}
