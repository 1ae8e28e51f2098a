package vm

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// accel returns "kvm" when QEMU can really use /dev/kvm here and "tcg"
// otherwise. /dev/kvm may exist and still be unusable (on the development
// machines QEMU aborts on an MSR write), so the answer comes from booting
// the image once with KVM; it is cached per host kernel release.
// $NETCTL_VM_ACCEL=kvm|tcg overrides the probe.
func (img *Image) accel(ctx context.Context) (string, error) {
	if a := os.Getenv("NETCTL_VM_ACCEL"); a != "" {
		if a != "kvm" && a != "tcg" {
			return "", fmt.Errorf("vm: NETCTL_VM_ACCEL=%q: use kvm or tcg", a)
		}
		return a, nil
	}
	if unix.Access("/dev/kvm", unix.R_OK|unix.W_OK) != nil {
		return "tcg", nil
	}
	var uts unix.Utsname
	unix.Uname(&uts)
	cacheFile := filepath.Join(img.Cache, "accel-"+unix.ByteSliceToString(uts.Release[:]))
	if b, err := os.ReadFile(cacheFile); err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	unlock, err := lockDir(filepath.Join(img.Cache, "accel.lock.d"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if b, err := os.ReadFile(cacheFile); err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	accel := "tcg"
	probe := RunOptions{Script: "exit 0", Timeout: 60 * time.Second, Stdout: io.Discard}
	os.MkdirAll(filepath.Join(img.Cache, "runs"), 0o755)
	dir, err := os.MkdirTemp(filepath.Join(img.Cache, "runs"), "accel-")
	if err == nil {
		os.WriteFile(filepath.Join(dir, "cmd"), []byte(img.script(probe)), 0o644)
		if res, err := img.boot(ctx, dir, "kvm", probe); err == nil && res.ExitCode == 0 {
			accel = "kvm"
		}
		os.RemoveAll(dir)
	}
	return accel, os.WriteFile(cacheFile, []byte(accel+"\n"), 0o644)
}
