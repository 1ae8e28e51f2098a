package macvtap_test

import (
	"errors"
	"runtime"
	"sync"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/macvtap"
)

// inTestNetns runs f on a goroutine whose thread joins the network
// namespace nsfd (the test's, from testenv.Host): a plain goroutine would
// run on another thread, in the machine's namespace. The thread is never
// unlocked, so it dies with the goroutine.
func inTestNetns(t *testing.T, nsfd int, f func()) {
	runtime.LockOSThread()
	if err := unix.Setns(nsfd, unix.CLONE_NEWNET); err != nil {
		t.Errorf("setns: %v", err)
		return
	}
	f()
}

// TestHostTapExclusiveRace: N goroutines create the same persistent tap
// with Exclusive at once. The kernel lets exactly one create it (IFF_TUN_EXCL
// makes tun_set_iff answer EBUSY to the others), the others get
// ErrConflict and hold no fd of it, and the winner's tap survives them.
// Without Exclusive the same open attaches to the existing tap, which is
// what the flag is for.
func TestHostTapExclusiveRace(t *testing.T) {
	testenv.Host(t)
	nsfd, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(nsfd)
	const n, rounds = 8, 10
	for round := 0; round < rounds; round++ {
		for _, queues := range []int{1, 2} {
			var (
				wg      sync.WaitGroup
				start   = make(chan struct{})
				mu      sync.Mutex // guards winners, refused
				winners []*macvtap.Tap
				refused int
			)
			for i := 0; i < n; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					inTestNetns(t, nsfd, func() {
						<-start
						tap, err := macvtap.CreateTap(macvtap.TapConfig{Name: "nctlrace0", VnetHdr: true, Queues: queues, Persistent: true, Exclusive: true})
						mu.Lock()
						defer mu.Unlock()
						switch {
						case err == nil:
							winners = append(winners, tap)
						case errors.Is(err, macvtap.ErrConflict) && errors.Is(err, unix.EBUSY):
							refused++
						default:
							t.Errorf("round %d, %d queue(s): %v", round, queues, err)
						}
					})
				}()
			}
			close(start)
			wg.Wait()
			if len(winners) != 1 || refused != n-1 {
				t.Fatalf("round %d, %d queue(s): %d created, %d refused; want 1 and %d", round, queues, len(winners), refused, n-1)
			}
			l, err := netlink.LinkByName("nctlrace0")
			if err != nil {
				t.Fatalf("the winner's tap is gone: %v", err)
			}
			if tt := l.(*netlink.Tuntap); tt.NonPersist {
				t.Errorf("round %d: the winner's tap is not persistent", round)
			}
			// The winner lets go of its queues; the persistent tap stays.
			// An open without Exclusive attaches to it (what the flag
			// prevents), one with Exclusive is still refused.
			winners[0].Close()
			again, err := macvtap.CreateTap(macvtap.TapConfig{Name: "nctlrace0", VnetHdr: true, Queues: queues})
			if err != nil {
				t.Fatalf("round %d: attaching without Exclusive: %v", round, err)
			}
			if _, err := macvtap.CreateTap(macvtap.TapConfig{Name: "nctlrace0", Queues: queues, Exclusive: true}); !errors.Is(err, macvtap.ErrConflict) {
				t.Errorf("round %d: Exclusive over a persistent tap nobody holds: %v, want ErrConflict", round, err)
			}
			if err := again.Delete(); err != nil {
				t.Fatal(err)
			}
			if _, err := netlink.LinkByName("nctlrace0"); err == nil {
				t.Fatal("nctlrace0 left after Delete")
			}
		}
	}
}
