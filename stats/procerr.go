package stats

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ptraceEnv is what decides whether this thread may read another
// process's memory (process_vm_readv checks ptrace access, mode
// PTRACE_MODE_ATTACH_REALCREDS): who it runs as, whether it holds
// CAP_SYS_PTRACE, Yama's ptrace_scope and the active security modules.
type ptraceEnv struct {
	euid      int
	capPtrace bool   // CAP_SYS_PTRACE in the calling thread's effective set
	yama      int    // kernel.yama.ptrace_scope, -1 without Yama
	lsms      string // /sys/kernel/security/lsm, "" when unknown
}

// readPtraceEnv reads the calling thread's ptraceEnv.
func readPtraceEnv() ptraceEnv {
	env := ptraceEnv{euid: os.Geteuid(), capPtrace: hasCapSysPtrace(), yama: -1}
	if b, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			env.yama = n
		}
	}
	if b, err := os.ReadFile("/sys/kernel/security/lsm"); err == nil && len(b) < 4096 {
		env.lsms = strings.TrimSpace(string(b))
	}
	return env
}

// hasCapSysPtrace says whether the calling thread has CAP_SYS_PTRACE in
// its effective set (capget of this thread: capabilities are per thread).
func hasCapSysPtrace() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false
	}
	return data[unix.CAP_SYS_PTRACE/32].Effective&(1<<(unix.CAP_SYS_PTRACE%32)) != 0
}

// permErr says why process_vm_readv of pid was refused (EPERM) and what
// to do, from env: without CAP_SYS_PTRACE, to a user "run as root" and to
// root (a container or unit that drops the capability) "give it the
// capability"; with it, Yama's ptrace_scope 3 (root included, until the
// next boot) or else a security module.
func permErr(pid int, err error, env ptraceEnv) error {
	what := fmt.Sprintf("process_vm_readv of QEMU (pid %d)", pid)
	switch {
	case env.yama == 3:
		return fmt.Errorf("%s: %w: kernel.yama.ptrace_scope is 3: no process, root included, may read another's memory "+
			"until the next boot, so netctl cannot read this VM's rings; to count them, boot with kernel.yama.ptrace_scope=2 "+
			"or lower (a file in /etc/sysctl.d)", what, err)
	case !env.capPtrace && env.euid != 0:
		return fmt.Errorf("%s: %w: run netctl as root (it needs ptrace access to QEMU: CAP_SYS_PTRACE)", what, err)
	case !env.capPtrace:
		yama := ""
		if env.yama == 2 {
			yama = " (kernel.yama.ptrace_scope is 2: only CAP_SYS_PTRACE may read another process's memory)"
		}
		return fmt.Errorf("%s: %w: netctl runs as root but without CAP_SYS_PTRACE%s, which reading QEMU's memory needs: "+
			"give it the capability (docker run --cap-add SYS_PTRACE; systemd: AmbientCapabilities=CAP_SYS_PTRACE "+
			"and CapabilityBoundingSet with it)", what, err, yama)
	}
	yama := "no Yama"
	if env.yama >= 0 {
		yama = fmt.Sprintf("Yama allows it, ptrace_scope %d", env.yama)
	}
	// The active modules that can refuse ptrace access: not capability
	// and yama (covered above) nor lockdown (which does not).
	var mods []string
	for _, m := range strings.Split(env.lsms, ",") {
		if m != "" && m != "capability" && m != "yama" && m != "lockdown" {
			mods = append(mods, m)
		}
	}
	active := ""
	if len(mods) > 0 {
		active = " (active: " + strings.Join(mods, ", ") + ")"
	}
	return fmt.Errorf("%s: %w: netctl has CAP_SYS_PTRACE and %s, so a Linux security module%s refused it: find the "+
		"denial in the kernel's log (journalctl -k | grep -i denied: operation=\"ptrace\") and allow netctl to read "+
		"QEMU's memory (AppArmor: a 'ptrace (read)' rule for QEMU in netctl's profile and 'ptrace (readby)' in QEMU's; "+
		"SELinux: process ptrace from netctl's domain to QEMU's)", what, err, yama, active)
}
