package migrate_test

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
	"github.com/netctl/netctl/test/vm"
)

// TestHostMigrateAcrossKernels: the same guest migrates from the 6.12 VM
// to the 6.1 VM, the stream through a file both reach (migrate
// "exec:cat > FILE", -incoming "exec:cat FILE"; no network between the
// VMs). TestMigrateHalfProcess does each VM's half: the 6.12 VM migrates
// two guests to files, one with a plain netctl vhost-net NIC (it
// negotiates RING_RESET, which 6.1's vhost-net lacks) and one pinned with
// the 6.1+6.12 plan; then the 6.1 VM takes them: the unpinned one is
// refused by netctl migrate incoming (naming the bit) and, forced in, fails
// the field's way (QEMU: Features 0x... unsupported); the pinned one
// arrives and its guest answers pings through the NIC on 6.1's vhost-net.
func TestHostMigrateAcrossKernels(t *testing.T) {
	testenv.Host(t)
	cache, err := vm.DefaultCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	imgs := map[string]*vm.Image{}
	for _, name := range []string{"6.12", "6.1"} {
		k, err := vm.LookupKernel(name)
		if err != nil {
			t.Fatal(err)
		}
		if imgs[name], err = vm.Prepare(ctx, cache, k, os.Stderr); err != nil {
			t.Fatalf("the %s image (make vm-prepare): %v", name, err)
		}
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "migrate.test")
	build := exec.CommandContext(ctx, "go", "test", "-c", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go test -c: %v\n%s", err, out)
	}
	share := filepath.Join(dir, "share")
	if err := os.Mkdir(share, 0o777); err != nil {
		t.Fatal(err)
	}
	cwd, _ := os.Getwd()
	// The L2 kernel is 6.12's on both sides: the destination QEMU is
	// started with the source's command line.
	l2Kernel := "/host" + imgs["6.12"].Vmlinuz
	for _, half := range []struct{ kernel, role string }{{"6.12", "source"}, {"6.1", "destination"}} {
		var out bytes.Buffer
		res, err := imgs[half.kernel].Run(ctx, vm.RunOptions{
			Script: "cd " + vm.ShellQuote("/host"+cwd) + " || exit 121\nexec " + vm.ShellQuote("/host"+bin) +
				" -test.run '^TestMigrateHalfProcess$' -test.v -test.timeout 8m",
			Env: map[string]string{"NETCTL_MIGRATE_HALF": half.role, "NETCTL_MIGRATE_SHARE": "/host" + share,
				"NETCTL_VM_VMLINUZ": l2Kernel},
			SMP: 2, MemMB: 1536, Timeout: 9 * time.Minute, Stdout: &out, Preload: []string{"kvm_amd"},
			Shares: []vm.Share{{HostPath: share, GuestPath: "/host" + share}},
		})
		t.Logf("%s half in the %s VM:\n%s", half.role, half.kernel, out.String())
		if err != nil || res.ExitCode != 0 || !strings.Contains(out.String(), "--- PASS: TestMigrateHalfProcess") {
			t.Fatalf("%s half: %+v %v", half.role, res, err)
		}
	}
}
