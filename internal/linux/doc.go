// Package linux is netctl's raw kernel ABI: every ioctl number, generic-netlink
// command and attribute, feature bit and mirrored struct that the public
// packages (vhostnet, vdpa, macvtap, zerocopy) use, and the single choke point
// through which every ioctl is issued.
//
// Names follow the kernel's UAPI headers so they can be grepped for:
// include/uapi/linux/vhost.h, vhost_types.h, vduse.h, vdpa.h, if_tun.h,
// virtio_net.h, virtio_config.h and virtio_ring.h. Values are for amd64 and
// arm64, which share the asm-generic ioctl encoding and these layouts (the
// package refuses to build for any other architecture), and
// were checked against ../shared/docs/kernel-facts.md (Linux 6.12.117); each
// mirrored struct has a test of its size and field offsets.
//
// Nothing here is meant for users of netctl: the public packages wrap these
// calls with typed values and errors that say what to do.
package linux
