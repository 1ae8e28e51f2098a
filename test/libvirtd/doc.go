// Package libvirtd runs a real libvirtd for host tests (the libvirt hook's
// end-to-end test): Debian 12's libvirtd 9.0 and virtlogd, started by the
// test as its own child processes (foreground, not -d: the test holds their
// pids and stops exactly those), inside the test's network and mount
// namespaces (testenv.Host).
//
// Privacy. libvirtd's system paths are fixed at build time (hooks in
// /etc/libvirt/hooks, its socket in /run/libvirt), so New gives the test
// its own copies by mounting in the test's private mount namespace: a tmpfs
// on /run, and an empty directory of the test's temporary tree bound onto
// each directory libvirtd writes (Dirs: /etc/libvirt, /var/lib/libvirt,
// /var/cache/libvirt, /var/log/libvirt), /etc/libvirt holding only the
// test's qemu.conf and hook directory (Seed). A test therefore depends on
// nothing an earlier libvirtd left on the machine (a fresh machine has no
// /etc/libvirt/secrets until one ran), reads none of the machine's libvirt
// configuration, and the machine's namespace sees none of it: no socket,
// no hook, no log, no QEMU capabilities cache and no domain of a test's
// daemon reaches it (cleanup checks that nothing appeared in the machine's
// Dirs), and two tests' daemons do not meet.
// Two more changes, in the test's namespace only: /dev/kvm is covered by
// a root-only file, and the private qemu.conf has no cgroups and no mount
// namespace for QEMU. These machines have a /dev/kvm that QEMU cannot use;
// libvirt 9.0 then judges its QEMU capabilities cache stale at every
// lookup and probes every QEMU binary again (52 s for one virsh create);
// with /dev/kvm hidden the cache holds and virsh create takes 0.3 s. Each
// daemon probes QEMU once, cold, when it starts (its cache is its own).
// virsh, run by Virsh from the test goroutine, talks to the test's daemon
// through its private /run/libvirt/libvirt-sock.
//
// Lifecycle. The test installs its hooks in HookDir before Start (libvirtd
// scans the hook directory only when it starts), then starts the daemon;
// t.Cleanup destroys every domain still running, stops libvirtd and
// virtlogd (SIGTERM, then SIGKILL), unmounts and removes the tree.
//
// Guests. Guest writes a world-readable copy of the test VM's 6.12 kernel
// and initramfs (test/vm) and a results share, and DomainXML makes a TCG
// domain (type='qemu', ACPI) that boots them and runs a shell script through
// test/vm's init (the 9p share tagged "results", as the VM harness does).
package libvirtd
