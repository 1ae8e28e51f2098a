package l2

import (
	"context"
	"regexp"
	"time"
)

// bootDeath is how the L2 kernel's console reads when it died while
// booting: a panic or an oops.
var bootDeath = regexp.MustCompile(`Kernel panic - not syncing|Oops: |BUG: kernel`)

// diedBooting says whether QEMU has exited because the L2 kernel died
// before its init reported any NIC. A TCG guest inside the TCG test VM
// does that now and then on a loaded host (a double fault or a jump to 0
// in start_kernel, long before any device is probed), which says nothing
// about netctl or vhost-net.
//
// A guest started with Config.Reboot does not exit when its kernel
// panics (panic=-1 reboots it): its console alone says so.
func (g *Guest) diedBooting() bool {
	if !g.reboot {
		select {
		case <-g.done:
		default:
			return false
		}
	}
	c := g.Console()
	return bootDeath.MatchString(c) && !nicLine.MatchString(c)
}

// bootAttempts is how many times StartLinux boots an L2 kernel that dies
// while booting: two deaths in a row were seen under a make test run beside
// two other VM workloads (a GPF in text_poke_early, then in start_kernel),
// and three in a row (GPFs in text_poke_early, then a panic in
// start_kernel) in a fresh clone's make test on 2026-12-02. A death comes
// within the first 30 s of the boot, so more attempts cost little.
const bootAttempts = 6

// StartLinux starts an L2 guest (Start) and waits until its init has
// reported n NICs (WaitNICs). If the L2 kernel died while booting, it
// starts it again (up to bootAttempts boots in all) and logf says why; the
// last death is an error like any other. The guest comes back whenever
// QEMU was started, with or without an error: the caller closes it (and
// may log its console).
func StartLinux(ctx context.Context, cfg Config, n int, timeout time.Duration, logf func(format string, args ...any)) (*Guest, map[string]GuestNIC, error) {
	for attempt := 1; ; attempt++ {
		g, err := Start(ctx, cfg)
		if err != nil {
			return nil, nil, err
		}
		nics, err := g.WaitNICs(ctx, n, timeout)
		if err == nil || !g.diedBooting() || attempt == bootAttempts {
			return g, nics, err
		}
		logf("the L2 kernel died while booting (TCG inside TCG, boot %d of at most %d), starting it again; its console:\n%s", attempt, bootAttempts, g.Console())
		if err := g.Close(); err != nil {
			return g, nil, err
		}
	}
}
