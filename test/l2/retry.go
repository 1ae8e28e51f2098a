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
func (g *Guest) diedBooting() bool {
	select {
	case <-g.done:
	default:
		return false
	}
	c := g.Console()
	return bootDeath.MatchString(c) && !nicLine.MatchString(c)
}

// StartLinux starts an L2 guest (Start) and waits until its init has
// reported n NICs (WaitNICs). If the L2 kernel died while booting, it
// starts it once more and logf says why; a second death is an error like
// any other. The guest comes back whenever QEMU was started, with or
// without an error: the caller closes it (and may log its console).
func StartLinux(ctx context.Context, cfg Config, n int, timeout time.Duration, logf func(format string, args ...any)) (*Guest, map[string]GuestNIC, error) {
	g, err := Start(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	nics, err := g.WaitNICs(ctx, n, timeout)
	if err == nil || !g.diedBooting() {
		return g, nics, err
	}
	logf("the L2 kernel died while booting (TCG inside TCG), starting it once more; its console:\n%s", g.Console())
	if err := g.Close(); err != nil {
		return g, nil, err
	}
	g, err = Start(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	nics, err = g.WaitNICs(ctx, n, timeout)
	return g, nics, err
}
