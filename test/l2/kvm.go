package l2

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
)

// LoadKVM loads kvm_amd in the L1 VM (an on-demand module of the 6.12
// image: QEMU's TCG emulates AMD SVM with nested paging, so L1 can run
// KVM guests) and checks /dev/kvm exists. It is for tests whose subject
// needs a KVM guest (libvirt opens /dev/vhost-net only for type='kvm'
// domains); everything else stays on TCG.
//
// It refuses a test VM with one vCPU: the L2 vCPU then runs on L1's only
// one and L1 starves (test/libvirtd stopped at the L2's boot in 2 runs of
// 4; the cni package's VM, left at one vCPU, froze until the harness killed
// it after 31 minutes in a CI run, twice on 2026-12-02).
func LoadKVM() error {
	if err := kvmCPUs(runtime.NumCPU()); err != nil {
		return err
	}
	consoleVerbose()
	if _, err := os.Stat("/dev/kvm"); err == nil {
		return kvmNodeAsUdev()
	}
	out, err := exec.Command("netctl-modprobe", "kvm_amd").CombinedOutput()
	if err != nil {
		return fmt.Errorf("load kvm_amd in the VM: %v: %s", err, strings.TrimSpace(string(out)))
	}
	if _, err := os.Stat("/dev/kvm"); err != nil {
		return fmt.Errorf("kvm_amd loaded but %w", err)
	}
	return kvmNodeAsUdev()
}

// consoleVerbose sets the L1 console loglevel to 7 and has a soft lockup
// dump every CPU's stack: under "quiet", an L1 that wedged beside a nested
// KVM guest showed nothing but "soft lockup" lines. It also keeps L1 from
// wedging, for reasons not understood: TestVMLibvirtdKubevirtVhost on 6.1,
// two VMs at a time, froze (the harness's *vm.FrozenError) in 5 of 15 runs
// without it and in none of 21 with it (2026-12-03). The emulator's nested
// SVM is the suspect: the freezes came at libvirtd's KVM probe or the L2's
// start, with both L1 CPUs stuck, and vgif=0 did not help.
func consoleVerbose() {
	os.WriteFile("/proc/sys/kernel/printk", []byte("7"), 0)
	os.WriteFile("/proc/sys/kernel/softlockup_all_cpu_backtrace", []byte("1"), 0)
}

// kvmNodeAsUdev gives /dev/kvm the group and mode udev gives it on a
// Debian host (systemd's 50-udev-default.rules: GROUP="kvm", and libvirt's
// QEMU user libvirt-qemu is in group kvm), so a QEMU libvirt starts as
// libvirt-qemu can open it: the VM has no udev. The group is the kvm of
// the chroot QEMU runs in (Root's /etc/group).
func kvmNodeAsUdev() error {
	b, err := os.ReadFile(Root + "/etc/group")
	if err != nil {
		return fmt.Errorf("/dev/kvm's group: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, ":")
		if len(f) >= 3 && f[0] == "kvm" {
			gid, err := strconv.Atoi(f[2])
			if err != nil {
				return fmt.Errorf("/dev/kvm's group: kvm's gid %q: %w", f[2], err)
			}
			if err := os.Chown("/dev/kvm", 0, gid); err != nil {
				return err
			}
			return os.Chmod("/dev/kvm", 0o660)
		}
	}
	return fmt.Errorf("/dev/kvm's group: no group kvm in %s/etc/group (install qemu-system-x86 on the host: make vm-deps)", Root)
}

// kvmCPUs says why a test VM with n vCPUs cannot run a nested KVM guest.
func kvmCPUs(n int) error {
	if n < 2 {
		return fmt.Errorf("a nested KVM guest needs 2 vCPUs in the test VM (it has %d: the L2 vCPU would starve L1): "+
			"put smp=2 in the package's testdata/netctl-vm.conf", n)
	}
	return nil
}

// PreferKVM is the accelerator for an L2 guest whose test is not about
// how it is run: "kvm" once LoadKVM succeeds, else "tcg" (logf says why).
// A Linux guest boots in ~10 s on nested KVM and in 80-200 s (and more
// under load) on TCG inside the TCG test VM, where its kernel also dies
// booting now and then (StartLinux boots it again). The package's VM needs
// 2 vCPUs (smp=2) and should preload kvm_amd (netctl-vm.conf).
func PreferKVM(logf func(format string, args ...any)) string {
	if err := LoadKVM(); err != nil {
		logf("no nested KVM in the test VM (%v): the L2 guest runs on TCG, minutes slower", err)
		return "tcg"
	}
	return "kvm"
}
