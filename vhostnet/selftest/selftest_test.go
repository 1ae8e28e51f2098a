package selftest

import (
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/vhostnet"
)

func TestBadOptions(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Queues: 257}, "use 1 to 256"},
		{Options{Queues: -1}, "use 1 to 256"},
		{Options{Frames: -5}, "use 1 to 100000"},
		{Options{Frames: 100001}, "use 1 to 100000"},
		{Options{FrameSize: 40}, "use 60 to 2036"},
		{Options{FrameSize: 4000}, "use 60 to 2036"},
		{Options{Timeout: -time.Second}, "positive"},
	} {
		if _, err := Run(t.Context(), c.o); !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want ErrInvalid saying %q", c.o, err, c.want)
		}
	}
}

// TestNoVhostNetSaysWhy runs where /dev/vhost-net is missing (the
// development machines): the error says so and what to do.
func TestNoVhostNetSaysWhy(t *testing.T) {
	if _, err := os.Stat(vhostnet.DevicePath); err == nil {
		t.Skip("this host has /dev/vhost-net")
	}
	_, err := Run(t.Context(), Options{})
	if !errors.Is(err, vhostnet.ErrNotAvailable) || !strings.Contains(err.Error(), "modprobe vhost_net") {
		t.Errorf("got %v, want ErrNotAvailable with what to do", err)
	}
}

func TestTally(t *testing.T) {
	const size = 100
	tl := newTally(false, 2, 4, size)
	// Every frame of queue 0, frames 0 and 1 of queue 1, one twice.
	for seq := 0; seq < 4; seq++ {
		tl.add(testFrame(false, 0, seq, size))
	}
	tl.add(testFrame(false, 1, 0, size))
	tl.add(testFrame(false, 1, 0, size))
	// Frame 2 of queue 1 with one byte flipped, frame 3 truncated.
	bad := testFrame(false, 1, 2, size)
	bad[size-1] ^= 1
	tl.add(bad)
	tl.add(testFrame(false, 1, 3, size)[:size-1])
	// Not ours: the other direction, another port, not IPv4, too short.
	for _, f := range [][]byte{testFrame(true, 0, 1, size), append([]byte(nil), testFrame(false, 0, 1, size)...)[:20], make([]byte, size)} {
		if tl.add(f) {
			t.Errorf("a foreign frame was counted: % x", f[:20])
		}
	}
	other := testFrame(false, 0, 1, size)
	other[37] = 9 // destination port
	if tl.add(other) {
		t.Error("a frame to another port was counted")
	}
	d := tl.direction(8, 8, 1)
	if d.Received != 5 || d.Lost != 3 || d.Corrupted != 2 || d.Duplicate != 1 || tl.intact[0] != 4 || tl.intact[1] != 1 {
		t.Errorf("%+v, per queue %v", d, tl.intact)
	}
	err := d.check("guest to host")
	if err == nil || err.Error() != "guest to host: 3 of 8 frames lost, 2 corrupted, 1 duplicated" {
		t.Errorf("check: %v", err)
	}
	// All 8 intact passes; a short send does not.
	ok := newTally(true, 2, 4, size)
	for i := 0; i < 8; i++ {
		ok.add(testFrame(true, i%2, i/2, size))
	}
	if err := ok.direction(8, 8, 1).check("host to guest"); err != nil {
		t.Errorf("all frames intact: %v", err)
	}
	if err := ok.direction(9, 8, 1).check("host to guest"); err == nil || !strings.Contains(err.Error(), "1 of 9 frames lost") ||
		!strings.Contains(err.Error(), "only 8 could be sent") {
		t.Errorf("one frame not sent: %v", err)
	}
}

// TestReceiverEndsOnClosedFD: the host-side receiver goroutine ends by
// itself when its fd is closed under it (an error path that closes the
// socket first), instead of spinning on EBADF, and stop reports why.
func TestReceiverEndsOnClosedFD(t *testing.T) {
	base := runtime.NumGoroutine()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[1])
	tv := unix.NsecToTimeval(int64(20 * time.Millisecond))
	unix.SetsockoptTimeval(fds[0], unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	tl := newTally(false, 1, 2, 200)
	r := startReceiver(fds[0], tl)
	for seq := 0; seq < 2; seq++ {
		if _, err := unix.Write(fds[1], testFrame(false, 0, seq, 200)); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(5 * time.Second); r.received() < 2 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if r.received() != 2 {
		t.Fatalf("received %d frames, want 2", r.received())
	}
	unix.Close(fds[0])
	select {
	case <-r.exited:
	case <-time.After(5 * time.Second):
		t.Fatal("the receiver goroutine is still running 5s after its fd was closed")
	}
	if err := r.stop(); !errors.Is(err, unix.EBADF) {
		t.Errorf("stop: %v, want EBADF", err)
	}
	if n := goroutinesBackTo(base); n > base {
		t.Errorf("%d goroutines, %d before", n, base)
	}
	// Stopped before the fd is closed: it ends at once, without an error.
	fds2, _ := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	defer unix.Close(fds2[0])
	defer unix.Close(fds2[1])
	unix.SetsockoptTimeval(fds2[0], unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	if err := startReceiver(fds2[0], newTally(false, 1, 1, 200)).stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
}

// goroutinesBackTo waits up to 5s for the goroutine count to fall to base
// and returns the count.
func goroutinesBackTo(base int) int {
	n := runtime.NumGoroutine()
	for deadline := time.Now().Add(5 * time.Second); n > base && time.Now().Before(deadline); n = runtime.NumGoroutine() {
		time.Sleep(10 * time.Millisecond)
	}
	return n
}
