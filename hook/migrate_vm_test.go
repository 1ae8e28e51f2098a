package hook

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/test/l2"
)

// TestVMHookMigrateBegin: migrate begin on the real kernels' probe (the
// calls as libvirt makes them: see migrate_test.go). The domain came
// from a host whose vhost-net offers RING_RESET, on machine pc-q35-7.2
// (queue_reset on by default; no USO); the host config names the pool's
// plan (the 6.1 and 6.12 VMs). On 6.1, whose vhost-net has no
// RING_RESET, migrate begin refuses it, naming RING_RESET and the
// queue_reset pin, and passes once the domain carries the pin; on 6.12
// it passes as it is; without the plan it passes with a note (netctl
// cannot know the source). Nothing is created either way.
func TestVMHookMigrateBegin(t *testing.T) {
	k := testenv.VM(t)
	if !k.Has("vhost_net") {
		t.Fatalf("kernel %s has no vhost_net capability: every test kernel has /dev/vhost-net", k.Name)
	}
	h := vmHook(t, t.TempDir())
	if res, err := h.Run(context.Background(), "mig1", "migrate", "begin", bytes.NewReader(sample(t, "migrate-vhost.xml"))); err != nil {
		t.Errorf("%s: migrate begin without a plan: %v; want a pass", k.Name, err)
	} else {
		t.Logf("without a plan: %+v", res)
	}
	plan, _ := writePlan(t, probeOf(t, "probe-6.1.json", ""), probeOf(t, "probe-6.12.json", ""))
	cfg, err := LoadConfig(writeConfig(t, `{"vdpa_dir": "`+filepath.Join(l2.Root, "run/netctl/vdpa")+`", "timeout": "60s", "plan": "`+plan+`"}`))
	if err != nil || cfg.Pool() == nil {
		t.Fatalf("the config with the plan: %+v %v", cfg, err)
	}
	h.Config = cfg
	xml := bytes.Replace(sample(t, "migrate-vhost.xml"), []byte("pc-q35-8.2"), []byte("pc-q35-7.2"), 1)
	pin := []byte("<qemu:override><qemu:device alias='net1'><qemu:frontend><qemu:property name='queue_reset' type='bool' value='false'/></qemu:frontend></qemu:device></qemu:override>\n</domain>")
	pinned := bytes.Replace(xml, []byte("</domain>"), pin, 1)
	ctx := context.Background()
	res, err := h.Run(ctx, "mig1", "migrate", "begin", bytes.NewReader(xml))
	t.Logf("kernel %s: migrate begin: %+v, %v", k.Name, res, err)
	if k.Name == "6.1" {
		if !errors.Is(err, errs.ErrNotSupported) || !strings.Contains(err.Error(), "RING_RESET (this kernel's vhost-net does not offer it)") ||
			!strings.Contains(err.Error(), "<qemu:property name='queue_reset' type='bool' value='false'/>") || strings.Contains(err.Error(), "USO") {
			t.Errorf("6.1: %v; want RING_RESET refused with its pin, and no USO (machine 7.2)", err)
		}
		if _, err := h.Run(ctx, "mig1", "migrate", "begin", bytes.NewReader(pinned)); err != nil {
			t.Errorf("6.1: the pinned domain: %v", err)
		}
	} else if err != nil {
		t.Errorf("%s: %v; want a pass (vhost-net offers RING_RESET)", k.Name, err)
	}
	if ds, _, _ := h.Store.ListDomains(); len(ds) != 0 {
		t.Errorf("migrate begin left a record: %+v", ds[0])
	}
}
