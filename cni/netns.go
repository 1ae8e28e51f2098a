package cni

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

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

// ownNetNS refuses a CNI_NETNS that is the plugin's own network
// namespace (the node's, for a runtime's plugin) unless the runtime
// really asks for it (CNI_NETNS_OVERRIDE=1 or true). skel checks the
// same, but only after ADD and DEL ran: a tap would be made, or
// deleted, in the node's namespace first.
func ownNetNS(args *skel.CmdArgs) error {
	if args.Netns == "" || args.NetnsOverride == "1" || strings.EqualFold(args.NetnsOverride, "true") {
		return nil
	}
	var own, st unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/net", &own); err != nil {
		return nil // no /proc: skel's check stands
	}
	h, err := hostnic.OpenNetNS(args.Netns)
	if err != nil {
		return nil // the command says what is wrong with it
	}
	defer h.Close()
	if unix.Fstat(int(h), &st) != nil || st.Dev != own.Dev || st.Ino != own.Ino {
		return nil
	}
	return types.NewError(types.ErrInvalidNetNS, fmt.Sprintf("netctl: CNI_NETNS %s is the plugin's own network namespace (the node's): "+
		"give the pod's; a runtime that means the node's sets CNI_NETNS_OVERRIDE=1", args.Netns), "CNI_NETNS")
}
