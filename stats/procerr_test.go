package stats

import (
	"errors"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestProcErrAsRoot: process_vm_readv's EPERM for a root netctl that has
// CAP_SYS_PTRACE (as the test runs here) is not "run netctl as root": it
// names what can refuse root (Yama's ptrace_scope, a security module).
func TestProcErrAsRoot(t *testing.T) {
	if os.Geteuid() != 0 || !hasCapSysPtrace() {
		t.Skip("not root with CAP_SYS_PTRACE: the message to give is run as root")
	}
	err := procErr(1234, unix.EPERM)
	if !errors.Is(err, unix.EPERM) {
		t.Errorf("%v does not wrap EPERM", err)
	}
	if msg := err.Error(); strings.Contains(msg, "run netctl as root") || !strings.Contains(msg, "security module") {
		t.Errorf("EPERM for root with CAP_SYS_PTRACE: %q, want what refused (a security module), not run as root", msg)
	}
}

// TestPermErr: what each refusal says, for each cause.
func TestPermErr(t *testing.T) {
	for _, c := range []struct {
		name string
		env  ptraceEnv
		want []string
		not  []string
	}{
		{"user", ptraceEnv{euid: 1000, yama: -1}, []string{"run netctl as root"}, nil},
		{"root, Yama 3", ptraceEnv{euid: 0, capPtrace: true, yama: 3},
			[]string{"kernel.yama.ptrace_scope is 3", "root included", "until the next boot", "ptrace_scope=2"}, []string{"run netctl as root"}},
		{"user with the capability, Yama 3", ptraceEnv{euid: 1000, capPtrace: true, yama: 3}, []string{"ptrace_scope is 3"}, []string{"run netctl as root"}},
		{"root without the capability", ptraceEnv{euid: 0, yama: 1},
			[]string{"without CAP_SYS_PTRACE", "--cap-add SYS_PTRACE", "AmbientCapabilities"}, []string{"run netctl as root", "ptrace_scope is"}},
		{"root without the capability, Yama 2", ptraceEnv{euid: 0, yama: 2},
			[]string{"without CAP_SYS_PTRACE", "kernel.yama.ptrace_scope is 2"}, []string{"run netctl as root"}},
		{"root, an LSM", ptraceEnv{euid: 0, capPtrace: true, yama: 1, lsms: "lockdown,capability,landlock,yama,apparmor"},
			[]string{"security module", "ptrace_scope 1", "landlock, apparmor", "journalctl -k", "ptrace (read)", "ptrace (readby)"}, []string{"run netctl as root", "lockdown", "capability,"}},
		{"root, no Yama, LSM list unknown", ptraceEnv{euid: 0, capPtrace: true, yama: -1}, []string{"security module", "no Yama"}, []string{"run netctl as root"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := permErr(4321, unix.EPERM, c.env)
			if !errors.Is(err, unix.EPERM) {
				t.Errorf("%v does not wrap EPERM", err)
			}
			msg := err.Error()
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%q lacks %q", msg, w)
				}
			}
			for _, w := range c.not {
				if strings.Contains(msg, w) {
					t.Errorf("%q says %q", msg, w)
				}
			}
		})
	}
}
