package testenv

import (
	"errors"
	"io/fs"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/macvtap"
)

// TestVMKernelMatrixIsTrue checks every capability of the matrix against
// the kernel the VM runs, through Require: where the kernel is known to
// have it, Require finds its node (and tun_uso is taken by a tap); where it
// is known to lack it, its node is missing (and a tap refuses USO with
// EINVAL).
func TestVMKernelMatrixIsTrue(t *testing.T) {
	for _, c := range Caps {
		t.Run(c, func(t *testing.T) {
			Require(t, c, func(m *Missing) {
				if c == "tun_uso" {
					m.Err(setUSO(m.T), unix.EINVAL)
					return
				}
				_, err := os.Stat(capProbes[c])
				m.Err(err, fs.ErrNotExist)
			})
			if c == "tun_uso" {
				if err := setUSO(t); err != nil {
					t.Errorf("the kernel has USO, yet a tap refused TUN_F_USO4|TUN_F_USO6: %v", err)
				}
			} else if _, ok := capProbes[c]; !ok {
				t.Fatalf("capability %s has no probe and no check here: add one", c)
			}
		})
	}
}

// setUSO asks a scratch tap, in the test's own network namespace, to take
// UDP segmentation offload.
func setUSO(t *testing.T) error {
	t.Helper()
	Host(t)
	tap, err := macvtap.CreateTap(macvtap.TapConfig{Name: "usoprobe0", VnetHdr: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tap.Close()
	err = linux.IoctlValue(tap.FD(), linux.TUNSETOFFLOAD, linux.TUN_F_CSUM|linux.TUN_F_USO4|linux.TUN_F_USO6)
	if err != nil && !errors.Is(err, unix.EINVAL) {
		t.Fatalf("TUNSETOFFLOAD: %v, want success or EINVAL", err)
	}
	return err
}
