package l2

import (
	"fmt"
	"os"
	"path/filepath"
)

// FDs counts what process pid's fds point at: the readlink of each
// /proc/PID/fd/N ("/dev/vhost-net", "socket:[123]", ...). A QEMU chrooted
// in /host holds L1's devices, so the links are L1's paths. An fd closed
// while it is read is left out; a process that is gone is an error.
func FDs(pid int) (map[string]int, error) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	es, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	n := map[string]int{}
	for _, e := range es {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil {
			n[l]++
		}
	}
	return n, nil
}
