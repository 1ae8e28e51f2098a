package selftest

import (
	"errors"
	"sync"

	"golang.org/x/sys/unix"
)

// receiver is the host side of the guest-to-host test: one goroutine that
// reads frames from a packet socket into a tally. It returns when stop is
// called or when a read fails with anything but a timeout (a closed fd
// gives EBADF), so it can never spin on a closed fd. It does not own fd,
// which must have SO_RCVTIMEO set so that stop is noticed. Safe for
// concurrent use.
type receiver struct {
	fd     int
	done   chan struct{} // closed by stop
	exited chan struct{} // closed when the goroutine has returned
	once   sync.Once
	mu     sync.Mutex // guards t and err
	t      *tally
	err    error // the read error that ended the goroutine
}

func startReceiver(fd int, t *tally) *receiver {
	r := &receiver{fd: fd, done: make(chan struct{}), exited: make(chan struct{}), t: t}
	go r.run()
	return r
}

func (r *receiver) run() {
	defer close(r.exited)
	buf := make([]byte, 64<<10)
	for {
		select {
		case <-r.done:
			return
		default:
		}
		n, _, err := unix.Recvfrom(r.fd, buf, 0)
		if err != nil {
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				continue
			}
			r.mu.Lock()
			r.err = err
			r.mu.Unlock()
			return
		}
		if n > len(buf) {
			n = len(buf)
		}
		r.mu.Lock()
		r.t.add(buf[:n])
		r.mu.Unlock()
	}
}

// received is how many frames arrived intact so far.
func (r *receiver) received() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.t.received
}

// stop ends the goroutine, waits for it, and returns the read error that
// ended it early, if any. Calling it again returns the same.
func (r *receiver) stop() error {
	r.once.Do(func() { close(r.done) })
	<-r.exited
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}
