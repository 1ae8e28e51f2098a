package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netctl/netctl/test/launcher"
	"github.com/netctl/netctl/test/pool"
)

// TestKubevirtSidecarCommand: netctl kubevirt sidecar, run as its own
// process with a pool plan, is found by a virt-launcher client
// (test/launcher) in its socket directory, answers OnDefineDomain on
// KubeVirt's fixture with the plan's pin (vhost, 4 queues, offload
// attributes, <qemu:override> queue_reset=false on ua-default), logs one
// JSON line per call on stderr, and on SIGTERM exits 0 having removed its
// socket.
func TestKubevirtSidecarCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root, err := os.MkdirTemp("", "kvhooks-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(root)
	dir := filepath.Join(root, "hook-sidecar-0")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	plan, _ := pool.Of(t, "probe-6.1.json", "probe-6.12.json")
	pj, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	planPath := filepath.Join(root, "pool.json")
	if err := os.WriteFile(planPath, pj, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := asNetctl("kubevirt", "sidecar", "--socket-dir", dir, "--plan", planPath, "--network-info", filepath.Join(root, "none"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	hooks, err := launcher.Collect(ctx, root, 1, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	dom, err := os.ReadFile("../../kubevirt/testdata/domain-tap.xml")
	if err != nil {
		t.Fatal(err)
	}
	vmi, err := os.ReadFile("../../kubevirt/testdata/vmi.json")
	if err != nil {
		t.Fatal(err)
	}
	out, err := hooks[0].OnDefineDomain(ctx, dom, vmi)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`name="vhost"`, `queues="4"`, `<host csum="on"`, "<qemu:device alias='ua-default'>", "<qemu:property name='queue_reset' type='bool' value='false'/>", "<qemu:commandline>"} {
		if !strings.Contains(string(out), w) {
			t.Errorf("the answer lacks %s:\n%s", w, out)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the sidecar did not exit after SIGTERM")
	}
	if _, err := os.Lstat(hooks[0].Socket); !os.IsNotExist(err) {
		t.Errorf("the socket is left after SIGTERM: %v", err)
	}
	if !strings.Contains(stderr.String(), `"call":"OnDefineDomain"`) || !strings.Contains(stderr.String(), "serving "+hooks[0].Socket) {
		t.Errorf("stderr:\n%s", stderr.String())
	}
}

// TestKubevirtSidecarBadPlan: a plan that is not netctl plan -j's output
// stops the sidecar before it listens, saying so (exit 2: the flag was
// given a bad file).
func TestKubevirtSidecarBadPlan(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "pool.json")
	if err := os.WriteFile(p, []byte(`{"hosts":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	r := execAsNetctl(t, "kubevirt", "sidecar", "--socket-dir", dir, "--plan", p)
	if r.code != 2 || !strings.Contains(r.stderr, "netctl plan -j") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
	if _, err := os.Lstat(filepath.Join(dir, "netctl.sock")); !os.IsNotExist(err) {
		t.Errorf("a socket was made")
	}
}
