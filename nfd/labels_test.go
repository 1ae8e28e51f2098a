package nfd

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/policy/host"
	"github.com/netctl/netctl/test/pool"
)

var probes = []string{"probe-6.1.json", "probe-6.12.json", "probe-6.12-vdpa.json", "probe-host-root.json", "probe-host-nonroot.json"}

func labelMap(t *testing.T, h *host.Description, o Options) map[string]string {
	t.Helper()
	ls, notes, err := Labels(h, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %v (notes %q)", h.Hostname, ls, notes)
	m := map[string]string{}
	for _, l := range ls {
		m[l.Name] = l.Value
	}
	return m
}

// TestLabelsOfTheVMKernels: the 6.12 VM (vhost-net, VDUSE, tap USO) and
// the 6.1 VM (vhost-net, no vdpa, no USO) get the labels their probes
// say, each a valid node label.
func TestLabelsOfTheVMKernels(t *testing.T) {
	m := labelMap(t, pool.Probe(t, "probe-6.12.json"), Options{})
	for k, v := range map[string]string{"vhost-net": "true", "vdpa": "true", "vdpa-mgmtdev.vduse": "true", "tap-uso": "true", "zerocopy": "false"} {
		if m[k] != v {
			t.Errorf("6.12: %s=%q, want %q", k, m[k], v)
		}
	}
	m1 := labelMap(t, pool.Probe(t, "probe-6.1.json"), Options{})
	for k, v := range map[string]string{"vhost-net": "true", "vdpa": "false", "tap-uso": "false"} {
		if m1[k] != v {
			t.Errorf("6.1: %s=%q, want %q", k, m1[k], v)
		}
	}
	if _, ok := m1["vdpa-mgmtdev.vduse"]; ok {
		t.Errorf("6.1 has no vdpa, yet a management device label")
	}
	if !strings.HasPrefix(m["featureset"], "fs-") || m["featureset"] == m1["featureset"] {
		t.Errorf("featuresets 6.12 %q, 6.1 %q: want two distinct fs- ids", m["featureset"], m1["featureset"])
	}
}

// TestFeatureSetEqualExactlyWhenPlanSaysSo: for every pair of the saved
// probes (the 6.1 and 6.12 VMs, this host as root and not), the two
// featureset ids are equal exactly when netctl plan offers each host the
// same set on its own, and then the plan of the pair offers that set
// too (a pool of equal ids loses nothing).
func TestFeatureSetEqualExactlyWhenPlanSaysSo(t *testing.T) {
	hs := map[string]*host.Description{}
	for _, p := range probes {
		hs[p] = pool.Probe(t, p)
	}
	// A copy of the 6.12 VM under another name and with a QEMU installed:
	// the same set (the node's QEMU is not the VMs').
	twin := *hs["probe-6.12.json"]
	twin.Hostname, twin.QEMU = "twin", host.QEMU{Binary: "/usr/bin/qemu-system-x86_64", Version: "7.2.22"}
	hs["twin"] = &twin
	offer := func(h *host.Description) string {
		c := *h
		c.QEMU = host.QEMU{}
		p, err := policy.Plan([]*host.Description{&c}, policy.Request{})
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(p.Offer)
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range hs {
			if !yield(k) {
				return
			}
		}
	})
	equalPairs := 0
	for i, a := range names {
		for _, b := range names[i+1:] {
			ia, err := FeatureSet(hs[a], Options{})
			if err != nil {
				t.Fatal(err)
			}
			ib, err := FeatureSet(hs[b], Options{})
			if err != nil {
				t.Fatal(err)
			}
			same := offer(hs[a]) == offer(hs[b])
			if (ia == ib) != same {
				t.Errorf("%s %s and %s %s: ids equal %v, plan's sets equal %v", a, ia, b, ib, ia == ib, same)
			}
			if same {
				equalPairs++
				ca, cb := *hs[a], *hs[b]
				ca.QEMU, cb.QEMU = host.QEMU{}, host.QEMU{}
				if cb.Hostname == ca.Hostname {
					cb.Hostname += "-2"
				}
				p, err := policy.Plan([]*host.Description{&ca, &cb}, policy.Request{})
				if err != nil {
					t.Fatal(err)
				}
				if p.ID != ia {
					t.Errorf("%s and %s share id %s but their pool's plan is %s", a, b, ia, p.ID)
				}
			}
		}
	}
	if equalPairs == 0 {
		t.Errorf("no pair with equal sets: the twin should be one")
	}
	if id, _ := FeatureSet(hs["twin"], Options{}); id != mustID(t, hs["probe-6.12.json"]) {
		t.Errorf("the node's own QEMU changed the featureset")
	}
	// The VMs' QEMU given: 7.2 has no USO properties, so the 6.12 set
	// loses USO and its id changes.
	with72, err := FeatureSet(hs["probe-6.12.json"], Options{QEMU: "7.2.0"})
	if err != nil || with72 == mustID(t, hs["probe-6.12.json"]) {
		t.Errorf("featureset for QEMU 7.2: %s, %v: want it to differ from the newest QEMU's", with72, err)
	}
}

func mustID(t *testing.T, h *host.Description) string {
	t.Helper()
	id, err := FeatureSet(h, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestMgmtdevLabels: management device names become label names (pci
// addresses' '/' and ':' become '-'); one too long, a collision and
// more than MaxMgmtdevLabels are left out with a note, never an invalid
// label.
func TestMgmtdevLabels(t *testing.T) {
	h := *pool.Probe(t, "probe-6.12.json")
	h.VDPA.MgmtDevs = []string{"pci/0000:65:00.2", "vduse", "pci/0000-65-00.2", strings.Repeat("x", 80), "a b", "-bad"}
	for i := 0; i < 70; i++ {
		h.VDPA.MgmtDevs = append(h.VDPA.MgmtDevs, fmt.Sprintf("auxiliary/mlx5_core.sf.%d", i))
	}
	ls, notes, err := Labels(&h, Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]bool{}
	n := 0
	for _, l := range ls {
		m[l.Name] = true
		if strings.HasPrefix(l.Name, "vdpa-mgmtdev.") {
			n++
		}
		if !ValidName(l.Name) || !ValidValue(l.Value) {
			t.Errorf("invalid label %s", l)
		}
	}
	if !m["vdpa-mgmtdev.pci-0000-65-00.2"] || !m["vdpa-mgmtdev.vduse"] || !m["vdpa-mgmtdev.a-b"] || n != MaxMgmtdevLabels {
		t.Errorf("labels %v (%d management devices)", ls, n)
	}
	joined := strings.Join(notes, "\n")
	for _, w := range []string{"make the same label", "cannot be a label name", "over 64 devices"} {
		if !strings.Contains(joined, w) {
			t.Errorf("notes lack %q:\n%s", w, joined)
		}
	}
}

// TestValidLabel: Kubernetes' label rules as NFD applies them.
func TestValidLabel(t *testing.T) {
	for _, v := range []string{"true", "fs-13000ff83", "a", "a.b_c-d", strings.Repeat("a", 63), ""} {
		if !ValidValue(v) {
			t.Errorf("%q should be a valid value", v)
		}
	}
	for _, v := range []string{"@local.x", "-a", "a-", "a/b", "a:b", "a b", "a=b", strings.Repeat("a", 64), "é"} {
		if ValidValue(v) {
			t.Errorf("%q should not be a valid value", v)
		}
	}
	if ValidName("") || !ValidName("vhost-net") {
		t.Errorf("ValidName")
	}
}

// TestFeatureSetUnnamedNode: a node probed without a hostname ("(none)",
// as the test VMs boot) gets its featureset all the same (the VM test
// found it refused).
func TestFeatureSetUnnamedNode(t *testing.T) {
	h := *pool.Probe(t, "probe-6.1.json")
	want := mustID(t, &h)
	for _, n := range []string{"(none)", ""} {
		h.Hostname = n
		if id, err := FeatureSet(&h, Options{}); err != nil || id != want {
			t.Errorf("hostname %q: %s, %v; want %s", n, id, err, want)
		}
	}
}

// TestLabelsNotProbedLeftOut: a probe that could not look at taps (not
// root: "not probed") gives no tap-uso and no featureset label, with a
// note, rather than tap-uso=false and a featureset of a set the node may
// well carry (nodes would land in the wrong pool); vhost-net, whose
// absence the probe saw, is still labelled.
func TestLabelsNotProbedLeftOut(t *testing.T) {
	h := pool.Probe(t, "probe-host-nonroot.json")
	ls, notes, err := Labels(h, Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, l := range ls {
		m[l.Name] = l.Value
	}
	if _, ok := m["tap-uso"]; ok {
		t.Errorf("tap-uso=%s from a probe that did not look at taps", m["tap-uso"])
	}
	if _, ok := m["featureset"]; ok {
		t.Errorf("featureset=%s from a probe that did not look at taps", m["featureset"])
	}
	if m["vhost-net"] != "false" {
		t.Errorf("vhost-net=%q, want false", m["vhost-net"])
	}
	if j := strings.Join(notes, "\n"); !strings.Contains(j, "run netctl nfd write as root") {
		t.Errorf("notes do not say to run as root:\n%s", j)
	}
}
