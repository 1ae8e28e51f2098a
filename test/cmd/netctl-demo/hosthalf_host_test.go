package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/qemuproc"
	"github.com/netctl/netctl/test/vm"
)

// The host half of make demo, run as make demo runs it (a real QEMU 7.2
// booting Debian's 6.12 kernel, the real netctl built from this tree),
// inside the test's own network namespace; the demo's namespace and
// QEMU's -name are the test's own, so a make demo running beside it is
// not disturbed.

// hostTestConfig is the demo's host configuration for test tag, with
// its temporary files under a directory of the test's (TMPDIR), which
// must be empty when the demo has cleaned up.
func hostTestConfig(t *testing.T, tag string) (hostConfig, string) {
	cfg := defaultHostConfig()
	cfg.Netns, cfg.VMName = "nctldemo-"+tag, "nctldemo-"+tag
	cfg.Netctl = buildNetctl(t)
	cache, err := vm.DefaultCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Busybox = filepath.Join(cache, "busybox", "bin", "busybox")
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	return cfg, tmp
}

// checkNothingLeft: no namespace by the demo's name, no QEMU by its VM
// name, no file (guest directory, netctl's records) under tmp.
func checkNothingLeft(t *testing.T, cfg hostConfig, tmp string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join("/run/netns", cfg.Netns)); !os.IsNotExist(err) {
		t.Errorf("/run/netns/%s after the demo: %v", cfg.Netns, err)
	}
	if vm, err := qemuproc.Find(cfg.VMName); err == nil {
		t.Errorf("QEMU %s (pid %d) still runs after the demo", cfg.VMName, vm.PID)
	}
	if es, err := os.ReadDir(tmp); err != nil || len(es) != 0 {
		t.Errorf("the demo left %d files in its TMPDIR (%v): %v", len(es), err, es)
	}
}

// TestHostDemoHostHalf: every step of the host half passes, the
// narrative shows what make demo promises, and nothing is left.
func TestHostDemoHostHalf(t *testing.T) {
	testenv.Host(t)
	cfg, tmp := hostTestConfig(t, "ok")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute) // a boot may wait for one of the two machine-wide VM slots
	defer cancel()
	var out bytes.Buffer
	t0 := time.Now()
	err := runHostHalf(ctx, newNarrator(&out), cfg)
	t.Logf("timing: host half %.1f s", time.Since(t0).Seconds())
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{
		"$ ip netns exec nctldemo-ok netctl attach --vm nctldemo-ok --id net1 --mac 52:54:00:de:00:02\nattached net1 to nctldemo-ok",
		"vhost-net: /dev/vhost-net: no such file or directory", "-> userspace (",
		"guest# ping -c 3", "$ ip netns exec nctldemo-ok busybox ping -c 3",
		"backend: tap nctl0, 1 queue(s), vhost=off: QEMU moves the packets",
		"detached net1", "no NICs attached by netctl", "$ ip netns del nctldemo-ok",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("the narrative lacks %q", want)
		}
	}
	if c := strings.Count(s, "3 packets transmitted, 3 packets received"); c != 2 {
		t.Errorf("%d pings of 3 answered in full, want 2 (guest to host, host to guest)", c)
	}
	if t.Failed() {
		t.Logf("narrative:\n%s", s)
	}
	checkNothingLeft(t, cfg, tmp)
}

// TestHostDemoUndoBeforeAttach: a netctl that fails (here: every call)
// stops the demo after the guest booted: the demo says so, exits with
// the error, and powers the guest off, removes its records and its
// namespace.
func TestHostDemoUndoBeforeAttach(t *testing.T) {
	testenv.Host(t)
	cfg, tmp := hostTestConfig(t, "u1")
	cfg.Netctl = "/bin/false"
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute) // a boot may wait for one of the two machine-wide VM slots
	defer cancel()
	var out bytes.Buffer
	err := runHostHalf(ctx, newNarrator(&out), cfg)
	if err == nil || !strings.Contains(err.Error(), "netctl vm list") {
		t.Errorf("demo with a failing netctl: %v, want the netctl vm list step to fail\n%s", err, out.String())
	}
	if s := out.String(); !strings.Contains(s, "the host half failed: undoing") || !strings.Contains(s, "$ ip netns del nctldemo-u1") {
		t.Errorf("the narrative does not show the undo:\n%s", s)
	}
	checkNothingLeft(t, cfg, tmp)
}

// TestHostDemoUndoAfterAttach: a step after netctl attach fails (the
// host's address is malformed): the undo detaches the NIC with netctl
// detach before it powers the guest off, and nothing is left.
func TestHostDemoUndoAfterAttach(t *testing.T) {
	testenv.Host(t)
	cfg, tmp := hostTestConfig(t, "u2")
	cfg.HostIP = "10.77.0.1/99"
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute) // a boot may wait for one of the two machine-wide VM slots
	defer cancel()
	var out bytes.Buffer
	err := runHostHalf(ctx, newNarrator(&out), cfg)
	if err == nil || !strings.Contains(err.Error(), "addr add 10.77.0.1/99") {
		t.Errorf("demo with a bad host address: %v, want ip addr add to fail\n%s", err, out.String())
	}
	s := out.String()
	if !strings.Contains(s, "netctl detach --vm nctldemo-u2 --id net1 --timeout 10s\ndetached net1") {
		t.Errorf("the undo did not detach the NIC:\n%s", s)
	}
	checkNothingLeft(t, cfg, tmp)
}

// TestHostDemoRefusesStaleNetns: a namespace by the demo's name that the
// demo did not create (a demo killed with SIGKILL leaves one) stops it
// before it changes anything, with the command that removes it; the
// namespace stays.
func TestHostDemoRefusesStaleNetns(t *testing.T) {
	testenv.Host(t)
	cfg, tmp := hostTestConfig(t, "u3")
	if out, err := exec.Command("ip", "netns", "add", cfg.Netns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v\n%s", err, out)
	}
	defer exec.Command("ip", "netns", "del", cfg.Netns).Run()
	var out bytes.Buffer
	err := runHostHalf(context.Background(), newNarrator(&out), cfg)
	if err == nil || !strings.Contains(err.Error(), "exists already") || !strings.Contains(err.Error(), "'ip netns del nctldemo-u3'") {
		t.Errorf("demo with a stale namespace: %v", err)
	}
	if s := out.String(); strings.Contains(s, "$ ") {
		t.Errorf("the demo ran commands although it refused:\n%s", s)
	}
	if _, err := os.Stat(filepath.Join("/run/netns", cfg.Netns)); err != nil {
		t.Errorf("the demo removed a namespace it did not create: %v", err)
	}
	if es, _ := os.ReadDir(tmp); len(es) != 0 {
		t.Errorf("the demo left files in its TMPDIR: %v", es)
	}
}
