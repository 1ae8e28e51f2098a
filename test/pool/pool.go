// Package pool gives tests the plan of the two test VMs' kernels (the
// probes saved from them in policy/testdata: vm-6-1 and vm-6-12), as
// netctl plan -j writes it and netctl attach --plan reads it back.
package pool

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/policy/host"
)

// Probe reads one saved probe of policy/testdata.
func Probe(t testing.TB, name string) *host.Description {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(file), "..", "..", "policy", "testdata", name)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		b, err = os.ReadFile("/host" + p) // in the test VM the tree is under /host
	}
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// Of is the plan of the saved probes names, written and read back.
func Of(t testing.TB, names ...string) (policy.PlanResult, *policy.Pool) {
	t.Helper()
	var hs []*host.Description
	for _, n := range names {
		hs = append(hs, Probe(t, n))
	}
	plan, err := policy.Plan(hs, policy.Request{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.ParsePlanFile(b)
	if err != nil {
		t.Fatal(err)
	}
	return plan, p
}

// VMKernels is the plan of the 6.1 and 6.12 test VMs: no RING_RESET (6.1's
// vhost-net lacks it), no USO (6.1's tun).
func VMKernels(t testing.TB) *policy.Pool {
	t.Helper()
	_, p := Of(t, "probe-6.1.json", "probe-6.12.json")
	return p
}
