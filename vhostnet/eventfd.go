package vhostnet

import "fmt"

// EventFD names the eventfd of a vring's kick, call or error notification,
// or none. Its zero value is "no eventfd" (the notification stays unbound),
// never fd 0, so a Vring{} left partly unset binds nothing by accident.
// It does not own the fd.
type EventFD struct {
	fd  int
	set bool
}

// NoEventFD is the zero EventFD: no eventfd.
var NoEventFD EventFD

// EventFDOf names fd; a negative fd (such as -1) means none.
func EventFDOf(fd int) EventFD {
	if fd < 0 {
		return EventFD{}
	}
	return EventFD{fd: fd, set: true}
}

// FD returns the fd and true, or -1 and false for none.
func (e EventFD) FD() (int, bool) {
	if !e.set {
		return -1, false
	}
	return e.fd, true
}

// raw is the fd as vhost's vhost_vring_file takes it: -1 unbinds.
func (e EventFD) raw() int {
	fd, _ := e.FD()
	return fd
}

func (e EventFD) String() string {
	if !e.set {
		return "none"
	}
	return fmt.Sprintf("fd %d", e.fd)
}
