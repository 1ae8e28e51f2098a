package hostnic

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// ErrNotNetNS: a path given as a network namespace names something else.
var ErrNotNetNS = errors.New("not a network namespace")

// nsGetNSType is NS_GET_NSTYPE (_IO(0xb7, 0x3), Linux 4.11).
const nsGetNSType = 0xb703

// OpenNetNS opens the network namespace at path (a bind mount such as
// /var/run/netns/NAME, or /proc/PID/ns/net) for setns. The path is
// opened O_PATH first and must be on nsfs: a FIFO, device, directory or
// file there is never opened for reading (which could block for ever,
// or act on a device). A missing path wraps os.ErrNotExist; anything
// but a network namespace wraps ErrNotNetNS.
func OpenNetNS(path string) (netns.NsHandle, error) {
	pfd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("network namespace %s: %w", path, err)
	}
	defer unix.Close(pfd)
	var fs unix.Statfs_t
	if err := unix.Fstatfs(pfd, &fs); err != nil {
		return -1, fmt.Errorf("network namespace %s: %w", path, err)
	}
	if fs.Type != unix.NSFS_MAGIC {
		return -1, fmt.Errorf("%s: %w (not on nsfs): give it as the runtime made it (/var/run/netns/NAME or /proc/PID/ns/net)", path, ErrNotNetNS)
	}
	fd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(pfd), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("network namespace %s: %w", path, err)
	}
	if t, err := unix.IoctlRetInt(fd, nsGetNSType); err == nil && t != unix.CLONE_NEWNET {
		unix.Close(fd)
		return -1, fmt.Errorf("%s: %w (another kind of namespace): give the pod's network namespace", path, ErrNotNetNS)
	}
	return netns.NsHandle(fd), nil
}
