package macvtap

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// ProbeOffloads finds by trial which offloads this kernel's tap (KindTap)
// or macvtap (KindMacvtap) takes: the kernel refuses flags it does not
// know with EINVAL (USO before Linux 6.2). Trial means setting every
// combination on a device, so ProbeOffloads makes its own scratch device in
// a throwaway network namespace, on a thread of its own, and never touches
// a device that carries traffic; the namespace and everything in it go
// away when it returns. It needs CAP_NET_ADMIN and CAP_SYS_ADMIN (root).
// A packet socket cannot refuse what its interface delivers: KindPacket
// gives every offload the virtio-net header can describe.
func ProbeOffloads(kind Kind) (Offloads, error) {
	switch kind {
	case KindPacket:
		return OffloadAll, nil
	case KindTap, KindMacvtap:
	default:
		return 0, fmt.Errorf("probe offloads: unknown backend kind %q: use tap, macvtap or packet: %w", kind, ErrInvalid)
	}
	type result struct {
		o   Offloads
		err error
	}
	done := make(chan result, 1)
	go func() {
		// Never unlocked: the thread ends with this goroutine. But the
		// main thread never ends (the runtime parks it), and when this
		// goroutine ran there it stayed in the scratch namespaces, which
		// /proc/PID/ns/* then showed: the thread goes back into the
		// namespaces it came from first.
		runtime.LockOSThread()
		// Without /proc (a chroot) the thread cannot be put back: it
		// ends locked in the scratch namespaces, as it always could.
		back, _ := namespacesNow()
		o, err := probeScratch(kind)
		if back != nil {
			back()
		}
		done <- result{o, err}
	}()
	r := <-done
	return r.o, r.err
}

// probeScratch runs on a locked thread that it moves into a new network
// and mount namespace (with a /sys that shows the new network namespace,
// where a macvtap's tapN number is read).
func probeScratch(kind Kind) (Offloads, error) {
	if err := unix.Unshare(unix.CLONE_NEWNET | unix.CLONE_NEWNS); err != nil {
		return 0, fmt.Errorf("probe %s offloads: a scratch network namespace needs CAP_SYS_ADMIN (run as root): %w", kind, err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return 0, fmt.Errorf("probe %s offloads: make the scratch namespace's mounts private: %w", kind, err)
	}
	if err := unix.Mount("sysfs", "/sys", "sysfs", 0, ""); err != nil {
		return 0, fmt.Errorf("probe %s offloads: mount a scratch /sys: %w", kind, err)
	}
	var q *queueSet
	if kind == KindTap {
		t, err := CreateTap(TapConfig{Name: "scratch0", VnetHdr: true})
		if err != nil {
			return 0, fmt.Errorf("probe tap offloads: scratch tap: %w", err)
		}
		defer t.Close()
		q = &t.queueSet
	} else {
		attrs := netlink.NewLinkAttrs()
		attrs.Name = "scratchv0"
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: "scratchv1"}); err != nil {
			return 0, fmt.Errorf("probe macvtap offloads: a scratch veth to put the macvtap on: %w", err)
		}
		m, err := CreateMacvtap(MacvtapConfig{Name: "scratchmv0", Lower: "scratchv0"})
		if err != nil {
			return 0, fmt.Errorf("probe macvtap offloads: scratch macvtap: %w", err)
		}
		defer m.Close()
		q = &m.queueSet
	}
	return probeOffloads(q.setOffloadsRaw)
}

// probeOffloads finds which offload combinations set accepts: all at once,
// else each feature with CSUM on its own.
func probeOffloads(set func(Offloads) error) (Offloads, error) {
	if err := set(OffloadAll); err == nil {
		return OffloadAll, nil
	} else if !errors.Is(err, unix.EINVAL) {
		return 0, err
	}
	var ok Offloads
	for _, o := range []Offloads{OffloadCSUM, OffloadCSUM | OffloadTSO4, OffloadCSUM | OffloadTSO6,
		OffloadCSUM | OffloadTSO4 | OffloadTSOECN, OffloadCSUM | OffloadUFO, OffloadCSUM | OffloadUSO4 | OffloadUSO6} {
		if err := set(o); err == nil {
			ok |= o
		} else if !errors.Is(err, unix.EINVAL) {
			return ok, err
		}
	}
	return ok, nil
}

// offloadError explains an EINVAL from TUNSETOFFLOAD: which rule o breaks,
// or that this kernel lacks a flag (USO came in Linux 6.2).
func offloadError(o Offloads, err error) error {
	if !errors.Is(err, unix.EINVAL) {
		return err
	}
	switch {
	case o&^OffloadCSUM != 0 && o&OffloadCSUM == 0:
		return fmt.Errorf("offloads %v: every offload needs csum: %w: %w", o, ErrInvalid, err)
	case (o&OffloadUSO4 != 0) != (o&OffloadUSO6 != 0):
		return fmt.Errorf("offloads %v: uso4 and uso6 go together: %w: %w", o, ErrInvalid, err)
	case o&OffloadTSOECN != 0 && o&(OffloadTSO4|OffloadTSO6) == 0:
		return fmt.Errorf("offloads %v: tso_ecn needs tso4 or tso6: %w: %w", o, ErrInvalid, err)
	case o&^OffloadAll != 0:
		return fmt.Errorf("offloads %v: unknown flags; netctl knows %v: %w: %w", o, OffloadAll, ErrInvalid, err)
	case o&(OffloadUSO4|OffloadUSO6) != 0:
		return fmt.Errorf("offloads %v: this kernel refuses uso4/uso6, which came in Linux 6.2 (UDP segmentation offload): %w: %w", o, ErrNotSupported, err)
	}
	return fmt.Errorf("offloads %v: refused by this kernel: %w: %w", o, ErrNotSupported, err)
}

// namespacesNow holds the calling thread's network and mount namespaces
// and returns what puts the thread back into them (best effort: a thread
// that cannot go back ends locked, as before); nil without /proc.
func namespacesNow() (back func(), err error) {
	net, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("hold this thread's network namespace: %w", err)
	}
	mnt, err := unix.Open("/proc/thread-self/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(net)
		return nil, fmt.Errorf("hold this thread's mount namespace: %w", err)
	}
	return func() {
		unix.Setns(net, unix.CLONE_NEWNET)
		unix.Setns(mnt, unix.CLONE_NEWNS)
		unix.Close(net)
		unix.Close(mnt)
	}, nil
}
