package qemuproc

import (
	"context"
	"errors"
	"fmt"
)

// State is what netctl vm list says about a monitor.
type State string

const (
	StateReachable State = "reachable" // QEMU greeted netctl: Dial would use it
	StateBusy      State = "busy"      // another client holds it (Detail: who, where /proc tells)
	StateLibvirt   State = "libvirt"   // libvirt's monitor: the VM is libvirt's
	StateUnusable  State = "unusable"  // netctl cannot connect to it (Detail: why)
	StateError     State = "error"     // connecting failed (Detail: the error)
)

// Check learns the state of monitor m of vm. A monitor on which a live
// process is QEMU's client is busy without a connection; otherwise Check
// connects and hangs up (QEMU sees a client come and go) or finds no
// greeting within GreetingTimeout. A monitor marked unusable or
// libvirt's is not dialed.
func Check(ctx context.Context, vm VM, m Monitor) (State, string) {
	switch {
	case m.Libvirt:
		return StateLibvirt, "libvirtd holds it: " + libvirtAdvice
	case m.Unusable != "":
		return StateUnusable, m.Unusable
	case m.Socket == "":
		return StateUnusable, "no socket path netctl can reach"
	}
	if who := holder(vm.PID, m); who != "" {
		return StateBusy, "in use by " + who
	}
	c, err := dialMonitor(ctx, m.Socket)
	if errors.Is(err, ErrBusy) {
		if why := notAnswering(vm.PID, m); why != "" {
			return StateError, why
		}
		if who := holder(vm.PID, m); who != "" {
			return StateBusy, "in use by " + who
		}
		return StateBusy, fmt.Sprintf("in use by another client (no greeting within %v)", GreetingTimeout)
	}
	if err != nil {
		return StateError, err.Error()
	}
	defer c.Close()
	if pid, err := c.PeerPID(); err != nil {
		return StateError, err.Error()
	} else if vm.PID != 0 && pid != vm.PID {
		return StateError, fmt.Sprintf("served by pid %d, not pid %d", pid, vm.PID)
	}
	return StateReachable, ""
}
