package hook

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/hostnic"
	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/policy/host"
	"github.com/netctl/netctl/state"
)

// quickProbe is the real host with a fixed description, so that the
// racing prepares reach the tap at the same moment (the real probe's
// time varies by tens of milliseconds).
type quickProbe struct {
	RealDevices
	desc host.Description
}

func (q quickProbe) Probe(context.Context, hostnic.ProbeSpec) (*host.Description, error) {
	d := q.desc
	return &d, nil
}

// TestHostHookTapRace: N domains that each have a tap of their own and
// name the same new tap are prepared at once, on N goroutines (each on a
// thread in the test's network namespace), round after round. Exactly
// one prepare wins; every other is refused with ErrConflict naming the
// tap, undoes its own tap, and never touches the winner's: the shared
// tap keeps the ifindex the winner recorded, and only the winner's
// release deletes it. The name check before the create cannot settle
// this (all N pass it together); the kernel's IFF_TUN_EXCL does.
func TestHostHookTapRace(t *testing.T) {
	testenv.Host(t)
	nsfd, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(nsfd)
	run := filepath.Join(t.TempDir(), "run")
	cfg := cfgWith(t, `{"vdpa_dir": "`+filepath.Join(run, "vdpa")+`"}`)
	dev := quickProbe{desc: host.Description{Schema: host.Schema, Kernel: "6.1",
		Tap: host.Tap{Available: true, Offloads: []string{"csum", "tso4", "tso6", "tso_ecn", "ufo"}}}}
	const n, rounds = 6, 15
	for round := 0; round < rounds; round++ {
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			mu      sync.Mutex // guards winners, refused
			winners []int
			refused int
		)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
				if err := unix.Setns(nsfd, unix.CLONE_NEWNET); err != nil {
					t.Errorf("setns: %v", err)
					return
				}
				st, err := state.Open(run)
				if err != nil {
					t.Error(err)
					return
				}
				h := &Hook{Config: cfg, Store: st, Devices: dev}
				p, err := ParsePlan([]byte(raceDomain(i)), cfg)
				if err != nil {
					t.Error(err)
					return
				}
				<-start
				_, err = h.Prepare(context.Background(), p)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					winners = append(winners, i)
				case errors.Is(err, errs.ErrConflict) && strings.Contains(err.Error(), "nctlrs0") && !strings.Contains(err.Error(), "\n"):
					refused++
				default:
					t.Errorf("round %d, domain %d: %v", round, i, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if len(winners) != 1 || refused != n-1 {
			t.Fatalf("round %d: %d prepares won (%v), %d refused; want 1 and %d", round, len(winners), winners, refused, n-1)
		}
		st, err := state.Open(run)
		if err != nil {
			t.Fatal(err)
		}
		w := winners[0]
		rec, err := st.LoadDomain(fmt.Sprintf("race%d", w))
		if err != nil || len(rec.Taps) != 2 {
			t.Fatalf("round %d: the winner's record %+v, %v", round, rec, err)
		}
		l, err := netlink.LinkByName("nctlrs0")
		if err != nil || l.Attrs().Index != rec.Taps[1].Ifindex {
			t.Fatalf("round %d: nctlrs0 after the losers' undo: %v, %v; the winner recorded ifindex %d", round, l, err, rec.Taps[1].Ifindex)
		}
		for i := 0; i < n; i++ {
			_, err := netlink.LinkByName(fmt.Sprintf("nctlr%d", i))
			if (err == nil) != (i == w) {
				t.Errorf("round %d: domain %d's own tap: %v (winner %d)", round, i, err, w)
			}
		}
		if ds, _, _ := st.ListDomains(); len(ds) != 1 {
			t.Errorf("round %d: %d records, want the winner's only", round, len(ds))
		}
		h := &Hook{Config: cfg, Store: st, Devices: dev}
		for i := 0; i < n; i++ {
			if _, err := h.Release(context.Background(), fmt.Sprintf("race%d", i)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := netlink.LinkByName("nctlrs0"); err == nil {
			t.Fatalf("round %d: nctlrs0 after the winner's release", round)
		}
	}
}

// raceDomain is domain race<i> with its own tap nctlr<i> and the shared
// tap nctlrs0.
func raceDomain(i int) string {
	return fmt.Sprintf(`<domain type='qemu'><name>race%d</name>
  <metadata><netctl:hook xmlns:netctl="http://netctl.dev/xmlns/hook/1">
    <netctl:interface mac="52:54:00:9b:00:%02x"/><netctl:interface mac="52:54:00:9b:01:%02x"/>
  </netctl:hook></metadata>
  <devices>
    <interface type='ethernet'><mac address='52:54:00:9b:00:%02x'/><target dev='nctlr%d' managed='no'/><model type='virtio'/><driver name='qemu' queues='2'/></interface>
    <interface type='ethernet'><mac address='52:54:00:9b:01:%02x'/><target dev='nctlrs0' managed='no'/><model type='virtio'/><driver name='qemu' queues='2'/></interface>
  </devices>
</domain>`, i, i, i, i, i, i)
}
