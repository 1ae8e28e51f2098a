// Package stats reads per-NIC and per-queue counters of the NICs netctl
// attached (and of any virtio-net NIC of a QEMU named by --vm/--qmp) from
// every source it can reach, and turns two samples into rates.
//
// Sources, per NIC (NICStats.Missing says why one gave nothing):
//
//   - "link": the host tap or macvtap's rtnetlink stats64 (packets, bytes,
//     errors, drops), named from the GUEST's side: a tap's tx is the
//     guest's rx (like `ip -s link show TAP`, directions swapped); a
//     macvtap's tx is already the guest's tx (not swapped). A tap
//     QEMU got as an fd is named from QEMU's fdinfo (tun's "iff:" line).
//   - "rings": each data virtqueue's avail and used indices, read where
//     they live, in QEMU's memory, without stopping anything: the rings'
//     guest-physical addresses from x-query-virtio-vhost-queue-status
//     (the queues of the vhost device QEMU has for it: with QEMU 7.2 the
//     first pair) or x-query-virtio-queue-status (every other queue, and
//     the first pair's of a tap or a netdev without vhost while vhost is
//     stopped; never the first pair's of a vhost-user or vdpa netdev,
//     since QEMU would ask the backend for its ring base, which stops a
//     vhost-user ring), then HMP gpa2hva for their address in QEMU, then
//     process_vm_readv on QEMU's pid for the rings' headers (flags and
//     idx of the avail and the used ring). Offered counts descriptor
//     chains the driver made available, Completed those the device used:
//     for TX one per packet; for RX one per buffer (a packet with
//     mergeable buffers may take several); both from 0 at netctl's first
//     read of the VM's NIC (see "Whose counts"). The addresses are
//     cached, asked again at each collection, and a reset starts the
//     rings' counts from 0 again: the device's
//     status changing, the rings moving, or a read between collections
//     that saw what a live ring never does (then nothing is counted until
//     the next collection). vhost stopping and starting (a paused VM, a
//     link down) is not a reset. A packed ring is not counted. QEMU 7.2
//     or newer (x-query-virtio*, debug commands); root, or ptrace access
//     to QEMU.
//   - "vhost": the vhost-net worker thread of each queue pair and its CPU
//     time (/proc/.../stat utime+stime at USER_HZ 100): threads of QEMU on
//     Linux 6.4+, kernel threads before, named vhost-<QEMU's thread id>
//     (found by one /proc scan per collection).
//   - "vdpa": vdpa vstats per data queue (like `vdpa dev vstats show DEV
//     qidx N`: received_desc, completed_desc); "not provided by this
//     driver (vduse)" where the parent driver has none (only mlx5_vdpa has).
//   - "qmp": the monitor itself (busy and who holds it, VM gone): the
//     rings are then still read from cached addresses.
//
// The 16-bit ring indices wrap after 65536 descriptors; Collect
// accumulates them, and Sample (or SampleEvery) reads them cheaply in
// between, so that a fast queue's wrap is not missed: see Sample for the
// rate an interval can follow.
//
// Rate is pure (no I/O): per-second rates between two samples of one
// NIC, with counter resets flagged instead of turned into huge rates.
//
// Whose counts: the ring counts of a VM with a UUID (QMP query-uuid, a
// libvirt domain's; QEMU's default, all zero, is none) are the VM's, not
// one QEMU process's (continuity.go): a QEMU of the same VM that takes a
// NIC over on this host once its guest's driver runs goes on with them,
// from the indices last read when it was started with -incoming (a
// migration's destination: the guest's rings came with their indices, and
// the traffic between the last read of the source and the switchover is
// counted once), else as a reset (a QEMU that booted the guest itself: the
// counts carried over, its new rings counted from 0); the older QEMU then
// yields ("NIC gone from this QEMU"). Without a UUID a new QEMU process
// counts from 0. The link counters are the link's own and the vhost
// workers' CPU time the thread's: a new tap or thread starts at 0.
//
// Who owns what: a Collector holds no fd and no QMP connection between
// calls; Collect dials each VM's monitor (qemuproc.Dial: a monitor
// another client holds is reported with the holder, not waited for),
// asks, and hangs up within the call, since QEMU serves one client per
// monitor. It keeps only numbers: each ring's host addresses, its last
// indices and the accumulated counts. A Collector is safe for concurrent
// use; Collect reads VMs in parallel, each NIC within Options.Deadline.
package stats
