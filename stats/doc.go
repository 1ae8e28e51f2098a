// Package stats reads per-NIC and per-queue counters of the NICs netctl
// attached (and of any virtio-net NIC of a QEMU named by --vm/--qmp) from
// every source it can reach, and turns two samples into rates.
//
// Sources, per NIC (NICStats.Missing says why one gave nothing):
//
//   - "link": the host tap or macvtap's rtnetlink stats64 (packets, bytes,
//     errors, drops), named from the GUEST's side: the tap's tx is the
//     guest's rx. Like `ip -s link show TAP`, directions swapped.
//   - "rings": each virtqueue's avail and used indices, read where they
//     live, in QEMU's memory, without stopping anything: ring addresses
//     from x-query-virtio-vhost-queue-status (vhost) or
//     x-query-virtio-queue-status (QEMU-served NICs), their address in
//     QEMU from HMP gpa2hva, then process_vm_readv on QEMU's pid for the
//     two 16-bit indices. The 16-bit indices wrap; the Collector
//     accumulates deltas mod 65536 (see Collector.Sample).
//   - "vhost": the vhost-net worker thread of each queue pair and its CPU
//     time (/proc/PID/task/TID/stat utime+stime).
//   - "vdpa": vdpa vstats per queue (like `vdpa dev vstats show DEV qidx N`).
//   - "qmp": the monitor itself (busy, gone): every QMP-based source then
//     says why.
//
// Rate is pure (no I/O): per-second rates between two samples of one NIC.
//
// Who owns what: a Collector holds no fd and no QMP connection between
// calls; Collect dials each VM's monitor, asks, and hangs up within the
// call (QEMU serves one client per monitor). It keeps only numbers: the
// last ring indices and the cached host addresses of each ring.
package stats
