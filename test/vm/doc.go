// Package vm is netctl's real-kernel test harness: it fetches Debian kernels
// (trixie's 6.12 and bookworm's 6.1) with apt-get download, builds a busybox
// initramfs holding the modules each kernel has, boots it under QEMU (KVM
// when QEMU can use it, TCG otherwise), runs one command or Go test binary
// inside with the host's / shared read-only at /host, and returns the
// command's exit status.
//
// Every way a run can end has its own error: the command's exit code comes
// back as is; a guest kernel panic is a *PanicError, a run past its timeout
// a *TimeoutError, QEMU refusing to start a *QEMUError, and a guest that
// stops without reporting a *NoStatusError.
//
// Downloads and built images are cached in a git-ignored directory
// (.cache/vm at the top of the module, or $NETCTL_VM_CACHE); a second
// Prepare downloads nothing. The command-line front end is
// test/cmd/netctl-vm; `go test -exec "netctl-vm exec"` runs a package's
// tests in the VM.
package vm
