package probe

import (
	"fmt"
	"os"
	"runtime"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/macvtap"
)

// probeScratch makes a scratch tap (and a macvtap on a veth) in a
// throwaway network and mount namespace and finds their offloads by trial.
// What fails is reported in r.Tap.Error or r.Macvtap.Error; nothing is
// ever made or mounted in the caller's namespaces, and the macvtap's
// device node goes in a private directory, never the host's /dev.
func probeScratch(r *Result) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread and its namespaces end with this goroutine
		if err := unix.Unshare(unix.CLONE_NEWNET | unix.CLONE_NEWNS); err != nil {
			why := fmt.Sprintf("not probed: a scratch network namespace needs CAP_SYS_ADMIN (run netctl probe as root): unshare: %v", err)
			r.Tap.Error, r.Macvtap.Error = why, why
			return
		}
		probeTap(r)
		probeMacvtap(r)
	}()
	<-done
}

func probeTap(r *Result) {
	tap, err := macvtap.CreateTap(macvtap.TapConfig{Name: "probe0", VnetHdr: true})
	if err != nil {
		r.Tap.Error = err.Error()
		return
	}
	defer tap.Close()
	r.Tap.Available = true
	o, err := tap.SupportedOffloads()
	if err != nil {
		r.Tap.Error = "offloads not probed: " + err.Error()
		return
	}
	r.Tap.Offloads = o.Names()
}

// probeMacvtap runs on the scratch thread, after unshare.
func probeMacvtap(r *Result) {
	// A private /sys that shows the scratch namespace (macvtap's tapN
	// numbers are read there), mounted only in this thread's view. Without
	// a private mount tree the sysfs mount would reach the host's.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		r.Macvtap.Error = fmt.Sprintf("not probed: making the scratch mount namespace private: %v", err)
		return
	}
	if err := unix.Mount("sysfs", "/sys", "sysfs", 0, ""); err != nil {
		r.Macvtap.Error = fmt.Sprintf("not probed: mounting a private /sys: %v", err)
		return
	}
	devDir, err := os.MkdirTemp("", "netctl-probe-")
	if err != nil {
		r.Macvtap.Error = fmt.Sprintf("not probed: no private directory for the macvtap's device node (the host's /dev is never used): %v", err)
		return
	}
	defer os.RemoveAll(devDir)
	attrs := netlink.NewLinkAttrs()
	attrs.Name = "probev0"
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: "probev1"}); err != nil {
		r.Macvtap.Error = "no veth to put a macvtap on: " + err.Error()
		return
	}
	mv, err := macvtap.CreateMacvtap(macvtap.MacvtapConfig{Name: "probemv0", Lower: "probev0", DevDir: devDir})
	if err != nil {
		r.Macvtap.Error = err.Error()
		return
	}
	defer mv.Close()
	r.Macvtap.Available = true
	o, err := mv.SupportedOffloads()
	if err != nil {
		r.Macvtap.Error = "offloads not probed: " + err.Error()
		return
	}
	r.Macvtap.Offloads = o.Names()
}
