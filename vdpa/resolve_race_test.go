package vdpa

import (
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// resolve's lazy sysfs read racing with Close and with other resolves: no data
// race (go test -race), no deadlock, and the answers stay the same.
func TestResolveRacesClose(t *testing.T) {
	for range 200 {
		fd, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		d := newVhostDevice(fd, "/dev/null")
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				if d.MapMode() != MapUnknown || d.DeviceName() != "" {
					t.Error("a char device that is not vhost-vdpa resolved")
				}
			})
		}
		wg.Go(func() { d.Close() })
		wg.Wait()
	}
}
