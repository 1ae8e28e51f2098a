// Package qemuproc finds the running QEMU to attach a NIC to and connects
// to one of its QMP monitors.
//
// List scans /proc for QEMU system emulators (argv[0] named
// qemu-system-* or qemu-kvm) and reads each command line (untrusted,
// bounded: MaxCmdline, MaxArgs) with ParseCmdline, a pure function: the
// VM's -name (guest=NAME,debug-threads=on, commas doubled to escape) and
// its QMP monitors (-qmp, -qmp-pretty, -chardev socket + -mon
// mode=control, and libvirt's monitor on an inherited fd). Socket paths
// are resolved as QEMU saw them, through /proc/PID/root and
// /proc/PID/cwd. Find picks a VM by name; Resolve serves the CLI's --vm
// and --qmp flags.
//
// Dial connects to the first monitor that greets within GreetingTimeout:
// QEMU serves one client per monitor, and a second client is queued by
// the kernel without a word, so silence means busy and the next monitor
// is tried. When every monitor is busy the error names who holds each
// (sock_diag and /proc, when netctl may read them); a VM whose only
// monitor is libvirt's is refused at once, pointing to the libvirt hook
// or virsh attach-device.
//
// Who owns what: Dial's *qmp.Client belongs to the caller (Close closes
// the connection); every other call closes what it opens before it
// returns (Check and Resolve's probes hang up; the O_PATH directory fd
// used for long socket paths is closed once connect has returned).
// Nothing here changes the VM: a probe is a QMP connection that QEMU sees
// open and close.
//
// Like `virsh list` plus `virsh qemu-monitor-command`'s socket lookup,
// without libvirt. Linux only (procfs, SO_PEERCRED, sock_diag).
package qemuproc
