// Package stats reads per-NIC and per-queue counters of the NICs netctl
// attached (and of any virtio-net NIC of a QEMU named by --vm/--qmp) from
// every source it can reach, and turns two samples into rates.
//
// Sources, per NIC (NICStats.Missing says why one gave nothing):
//
//   - "link": the host tap or macvtap's rtnetlink stats64 (packets, bytes,
//     errors, drops), named from the GUEST's side: the tap's tx is the
//     guest's rx. Like `ip -s link show TAP`, directions swapped. A tap
//     QEMU got as an fd is named from QEMU's fdinfo (tun's "iff:" line).
//   - "rings": each data virtqueue's avail and used indices, read where
//     they live, in QEMU's memory, without stopping anything: the rings'
//     guest-physical addresses from x-query-virtio-vhost-queue-status
//     (the queues of the vhost device QEMU has for it: with QEMU 7.2 the
//     first pair) or x-query-virtio-queue-status (every other queue; never
//     asked for a vhost device's own queues, since it would ask the
//     backend for its ring base, which stops a vhost-user ring), then HMP
//     gpa2hva for their address in QEMU, then process_vm_readv on QEMU's
//     pid for the two 16-bit indices (avail->idx at avail+2, used->idx at
//     used+2). Offered counts descriptor chains the driver made available,
//     Completed those the device used: for TX one per packet; for RX one
//     per buffer (a packet with mergeable buffers may take several). The
//     addresses are cached and resolved again when the device's status
//     changes (reset, restart), the indices break the ring's invariant,
//     or a read fails (a new QEMU after a migration has another pid).
//     QEMU 7.2 or newer (x-query-virtio*, debug commands); root, or
//     ptrace access to QEMU.
//   - "vhost": the vhost-net worker thread of each queue pair and its CPU
//     time (/proc/.../stat utime+stime at USER_HZ 100): threads of QEMU on
//     Linux 6.4+, kernel threads before, named vhost-<QEMU's thread id>.
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
// Who owns what: a Collector holds no fd and no QMP connection between
// calls; Collect dials each VM's monitor (qemuproc.Dial: a monitor
// another client holds is reported with the holder, not waited for),
// asks, and hangs up within the call, since QEMU serves one client per
// monitor. It keeps only numbers: each ring's host addresses, its last
// indices and the accumulated counts. A Collector is safe for concurrent
// use; Collect reads VMs in parallel, each NIC within Options.Deadline.
package stats
