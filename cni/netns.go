package cni

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/hostnic"
)

// errNetNSGone: CNI_NETNS names no namespace (any more); errNotNetNS:
// it names something else.
var (
	errNetNSGone = errors.New("the network namespace is gone")
	errNotNetNS  = hostnic.ErrNotNetNS
)

// inNetNS runs fn on this goroutine's thread inside the network
// namespace at path, and comes back. If it cannot come back, the thread
// stays locked and the runtime ends it with the goroutine, so no other
// code runs in the pod's namespace by mistake. A path that does not
// exist wraps errNetNSGone; one that is no network namespace is an error.
func inNetNS(path string, fn func() error) error {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("this thread's network namespace: %w", err)
	}
	defer orig.Close()
	target, err := hostnic.OpenNetNS(path)
	if err != nil {
		runtime.UnlockOSThread()
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s: %w", path, errNetNSGone)
		}
		return fmt.Errorf("CNI_NETNS: %w", err)
	}
	defer target.Close()
	if err := netns.Set(target); err != nil {
		runtime.UnlockOSThread()
		if errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("CNI_NETNS %s: %w: give it as the runtime made it (/var/run/netns/NAME or /proc/PID/ns/net)", path, errNotNetNS)
		}
		return fmt.Errorf("enter network namespace %s: %w", path, err)
	}
	ferr := fn()
	if err := netns.Set(orig); err != nil {
		return errors.Join(ferr, fmt.Errorf("return from network namespace %s: %w", path, err)) // the thread stays locked and dies
	}
	runtime.UnlockOSThread()
	return ferr
}
