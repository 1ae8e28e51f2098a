// Package l2 runs a nested guest inside the test VM (test/vm): the host's
// QEMU, started in L1 through `chroot /host`, boots the same kernel as L1
// (the uncompressed vmlinux, PVH-booted, with boot trims) with a busybox
// initramfs that loads failover, net_failover and virtio_net and prints,
// for each NIC, the guest driver's own feature word on the serial log.
//
// It is for end-to-end tests of code that talks to a real QEMU over QMP
// with its NICs on kernel vhost-net (vhost=on: QEMU opens /dev/vhost-net
// itself). An L2 boot costs 60-100 s under nested TCG: boot once and
// check everything in that boot.
//
// Lifecycle: Start makes the chroot usable (binds L1's /dev, /proc and
// /sys into /host, a tmpfs on /host/run), writes the vmlinux and the
// initramfs to /host/run/l2, and starts QEMU; WaitNICs reads the serial
// log until every NIC has reported; Close kills QEMU and waits for it, on
// every path. The Guest owns the QEMU process; QEMU owns its tap and vhost
// fds. Files under /host/run/l2 stay until the VM powers off.
//
// StartFirmware starts a QEMU with no OS instead: paused, booting iPXE
// from each hotplugged virtio-net NIC, so a test proves a data path in
// seconds (ServeDHCP answers iPXE's DHCP on the tap; QueryVirtioStatus
// reads QEMU's view). The test owns the fds it opens and passes over QMP
// (QEMU gets its own copies); QEMU owns what it received.
package l2
