package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
)

// TestVMDemoVMHalf runs the VM half of make demo as make demo runs it,
// with the netctl that make build put in bin/ (make test-vm builds it
// first; the VM has no Go toolchain to build one): a nested QEMU gets a
// vhost-net NIC, iPXE's DHCP crosses it, detach times out at the firmware
// stage and completes after a reset, nothing is left.
func TestVMDemoVMHalf(t *testing.T) {
	k := testenv.Require(t, "vhost_net", nil)
	netctl := filepath.Join(moduleRoot(t), "bin", "netctl")
	if _, err := os.Stat(netctl); err != nil {
		t.Fatalf("%v: run make build", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	var out bytes.Buffer
	t0 := time.Now()
	err := runVMHalf(ctx, newNarrator(&out), vmConfig{Netctl: netctl, MAC: "52:54:00:de:01:02", RunDir: t.TempDir()})
	t.Logf("timing: kernel %s: VM half %.1f s", k.Name, time.Since(t0).Seconds())
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{
		"kernel vhost-net, 1 queue pair(s)", "-> vhost-net (", "-> /dev/vhost-net",
		"DHCPREQUEST  guest -> host", "vhost=on: vhost-net moves the packets",
		"detach-timeout", "detached net1", "no NICs attached by netctl",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("the narrative lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("narrative:\n%s", s)
	}
}
