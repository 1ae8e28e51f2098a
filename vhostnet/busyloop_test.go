package vhostnet

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// TestBusyLoopWithoutTheIoctl: a kernel that does not know the busy-loop
// ioctls (before Linux 4.6) answers ENOTTY, as any fd that is not a vhost
// device does; a pipe stands in for it. Callers (netctl probe) must be able
// to tell "not supported" with errors.Is(err, ErrNotSupported), not by
// testing the errno.
func TestBusyLoopWithoutTheIoctl(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[1])
	d := &Device{fd: p[0], open: true, backends: [2]int{-1, -1}}
	defer d.Close()
	if err := d.SetBusyLoopTimeout(0, 50); !errors.Is(err, ErrNotSupported) || !errors.Is(err, unix.ENOTTY) {
		t.Errorf("SetBusyLoopTimeout on a kernel without the ioctl: %v, want ErrNotSupported wrapping ENOTTY", err)
	}
	if _, err := d.BusyLoopTimeout(0); !errors.Is(err, ErrNotSupported) {
		t.Errorf("BusyLoopTimeout on a kernel without the ioctl: %v, want ErrNotSupported", err)
	}
	// Other errors keep their meaning: a closed device is ErrClosed only.
	d.Close()
	if err := d.SetBusyLoopTimeout(0, 50); !errors.Is(err, ErrClosed) || errors.Is(err, ErrNotSupported) {
		t.Errorf("SetBusyLoopTimeout after Close: %v, want ErrClosed", err)
	}
}
