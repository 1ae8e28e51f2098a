package vhostnet

import (
	"errors"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestOpenErrorsSayWhatToDo(t *testing.T) {
	for _, c := range []struct {
		errno unix.Errno
		want  string
		avail bool
	}{
		{unix.ENOENT, "modprobe vhost_net", true},
		{unix.EACCES, "run as root", true},
		{unix.EPERM, "run as root", true},
		{unix.EMFILE, "open /dev/vhost-net", false},
	} {
		err := openError(c.errno)
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %q lacks %q", c.errno, err, c.want)
		}
		if !errors.Is(err, c.errno) || errors.Is(err, ErrNotAvailable) != c.avail {
			t.Errorf("%v: %v does not wrap the errno (or ErrNotAvailable=%v)", c.errno, err, c.avail)
		}
	}
	if !errors.Is(openError(unix.EACCES), os.ErrPermission) {
		t.Error("EACCES is not os.ErrPermission")
	}
}

func TestClosedDevice(t *testing.T) {
	d := &Device{fd: -1}
	if _, err := d.Features(); !errors.Is(err, ErrClosed) {
		t.Errorf("Features on a closed device: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestZeroDeviceIsClosed: a Device that Open did not make issues no ioctl
// on fd 0; it reports ErrClosed.
func TestZeroDeviceIsClosed(t *testing.T) {
	var d Device
	if _, err := d.Features(); !errors.Is(err, ErrClosed) {
		t.Errorf("Features on a zero Device: %v, want ErrClosed", err)
	}
	if fd := d.FD(); fd != -1 {
		t.Errorf("FD of a zero Device: %d, want -1", fd)
	}
	if err := d.Close(); err != nil {
		t.Errorf("Close of a zero Device: %v (it must not close fd 0)", err)
	}
}
