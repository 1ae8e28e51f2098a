package hostnic

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/vhostnet"
)

func (Real) OpenVhostNet() (int, error) {
	d, err := vhostnet.Open() // its error says what to do when the device is missing
	if err != nil {
		return -1, err
	}
	defer d.Close()
	fd, err := unix.FcntlInt(uintptr(d.FD()), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("vhost-net: dup: %w", err)
	}
	return fd, nil
}
