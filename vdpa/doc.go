// Package vdpa manages vDPA devices: the kernel's "vdpa" generic-netlink
// family (management devices, device add/del/show, config, vstats) and the
// /dev/vhost-vdpa-N devices that drive them. The family exists only in the
// initial network namespace. (In progress: see the vDPA issue.)
package vdpa
