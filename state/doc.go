// Package state is the one owner of netctl's record of what it attached to
// running VMs: one JSON file per NIC under a root directory (DefaultDir,
// /run/netctl; the CLI takes NETCTL_RUN_DIR, tests a temporary directory).
// attach writes a record after a NIC is in QEMU; detach, list, and later
// the hook and gc, read it. A record says what netctl CREATED (a tap, a
// macvtap, a vdpa device) apart from what it only opened: only what netctl
// created is ever deleted.
//
// Layout under the root (the lock is keyed by the QMP socket: QEMU serves
// one QMP connection at a time, so that is what must serialise):
//
//	nics/VMKEY@ID.json   one record (VMKEY is the VM's name, escaped:
//	                     VMKey, KeyFor; neither a key nor an id holds '@'),
//	                     checked on reading to be the VM and id asked for.
//	                     Files an older netctl named VMKEY.ID.json, which
//	                     two VMs could share, are read and checked the same
//	                     way and replaced at the next Save
//	hook/VMKEY.json      the libvirt hook's record of one domain
//	locks/KEY.lock       the per-VM lock (flock): attaches and detaches on
//	                     one VM serialise; different VMs run in parallel.
//	                     The file outlives its holder; netctl gc removes
//	                     those of VMs that are gone (RemoveLock: only while
//	                     holding the flock, and Lock re-checks that its fd
//	                     is still the file at the path)
//
// Records are written atomically (a temporary file in the same directory,
// fsync, rename, fsync of the directory). Reading treats the files as
// untrusted: a file over MaxRecordSize, with unknown fields, a wrong
// schema or values out of range is an error that names the file, and List
// reports it without failing on the others.
//
// A Store holds no fds between calls; a Lock owns its lock file's fd until
// Unlock. Both are safe for concurrent use.
package state
