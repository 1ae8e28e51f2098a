package vdpa

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/internal/vhost"
)

// Virtqueue groups and address spaces (Linux 5.17): a device puts its
// virtqueues in groups, and each group can be given an address space of
// its own (VHOST_VDPA_SET_GROUP_ASID). QEMU's shadow virtqueues use them
// to shadow only the control virtqueue.

// GroupNum is VHOST_VDPA_GET_GROUP_NUM, the number of virtqueue groups.
func (d *VhostDevice) GroupNum() (uint32, error) {
	return d.getU32(linux.VHOST_VDPA_GET_GROUP_NUM)
}

// ASNum is VHOST_VDPA_GET_AS_NUM, the number of address spaces.
func (d *VhostDevice) ASNum() (uint32, error) {
	return d.getU32(linux.VHOST_VDPA_GET_AS_NUM)
}

func (d *VhostDevice) getU32(req linux.Request) (uint32, error) {
	var n uint32
	err := d.use(func(fd int, _ vhost.Dev) (err error) {
		n, err = linux.GetU32(fd, req)
		return
	})
	return n, d.wrapUse(err)
}

// VringGroup is VHOST_VDPA_GET_VRING_GROUP: the group of virtqueue idx.
// The kernel answers only the fd's owner (SetOwner first: EPERM
// otherwise); a parent without groups (VDUSE in 6.12) gives an error
// wrapping ErrNotSupported.
func (d *VhostDevice) VringGroup(idx uint32) (uint32, error) {
	var g uint32
	err := d.use(func(_ int, v vhost.Dev) (err error) {
		g, err = v.State(linux.VHOST_VDPA_GET_VRING_GROUP, idx, 0)
		return
	})
	if errors.Is(err, unix.EOPNOTSUPP) {
		return 0, d.wrap(fmt.Errorf("VHOST_VDPA_GET_VRING_GROUP: the device's parent has no virtqueue groups: %w (%w)", ErrNotSupported, err))
	}
	return g, d.wrapUse(err)
}
