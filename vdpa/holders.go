package vdpa

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Holder is a process with a device's vhost-vdpa node open.
type Holder struct {
	PID  int
	Comm string
	Path string // /dev/vhost-vdpa-N
}

func (h Holder) String() string { return fmt.Sprintf("pid %d (%s)", h.PID, h.Comm) }

// Holders lists the processes that have the device's /dev/vhost-vdpa-N
// open. The kernel does not delete a device while one is open: vdpa dev del
// waits, without a timeout, until every such fd is closed.
func Holders(name string) ([]Holder, error) {
	nodes, _ := filepath.Glob(filepath.Join(SysfsDevices, name, "vhost-vdpa-*"))
	if len(nodes) == 0 {
		return nil, nil // not bound to vhost_vdpa: nothing to hold
	}
	path := "/dev/" + filepath.Base(nodes[0])
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var hs []Holder
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		fds, err := os.ReadDir(filepath.Join("/proc", p.Name(), "fd"))
		if err != nil {
			continue // gone, or not ours to read
		}
		for _, fd := range fds {
			if t, err := os.Readlink(filepath.Join("/proc", p.Name(), "fd", fd.Name())); err == nil && t == path {
				comm, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "comm"))
				hs = append(hs, Holder{PID: pid, Comm: strings.TrimSpace(string(comm)), Path: path})
				break
			}
		}
	}
	return hs, nil
}
