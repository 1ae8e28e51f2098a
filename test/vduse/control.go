// Package vduse is netctl's test-only VDUSE device: a virtio-net device
// implemented by this process, so that tests get a real /dev/vhost-vdpa-N
// on kernels without vDPA hardware (Linux 6.9+ for net devices; VDUSE
// itself came in 5.15). So far it holds the control-device calls.
package vduse

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
)

// ControlPath is VDUSE's control device; it exists once the vduse module
// is loaded (it has no devname alias, so opening does not load it).
const ControlPath = "/dev/vduse/control"

// APIVersion opens the control device and returns VDUSE_GET_API_VERSION
// (0 on every kernel up to at least 6.12).
func APIVersion() (uint64, error) {
	fd, err := unix.Open(ControlPath, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return 0, fmt.Errorf("vduse: %s: %w: load the vduse module (modprobe vduse; Linux 5.15+, net devices 6.9+)", ControlPath, err)
		}
		return 0, fmt.Errorf("vduse: open %s: %w", ControlPath, err)
	}
	defer unix.Close(fd)
	v, err := linux.GetU64(fd, linux.VDUSE_GET_API_VERSION)
	if err != nil {
		return 0, fmt.Errorf("vduse: %w", err)
	}
	return v, nil
}
