// Package host is the description of a virtualization host that netctl
// probe writes (netctl probe -j) and that policy.Decide, policy.Plan and
// netctl diagnose read: the kernel's vhost-net, tun, macvtap and vDPA
// support, zero-copy TX, the installed QEMU and chosen network devices.
//
// It is data only. It imports nothing that touches the kernel, so the
// decisions built on it stay pure; policy/probe fills it in on a live host.
// A description read from a file is untrusted: Parse checks its schema and
// bounds its size.
package host
