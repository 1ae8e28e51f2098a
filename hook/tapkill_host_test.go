package hook

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/netctl/netctl/internal/testenv"
)

// TestHostReviewTapKilledMidCreate: a hook killed (SIGKILL, OOM) while
// RealDevices.CreateTap runs must never leave a persistent tap without
// the hook's alias: the next prepare would refuse it ("exists and netctl
// did not create it") and no release would delete it, so the domain
// could not start until someone deleted the tap by hand. A child process
// makes and deletes taps in a loop and is killed at random moments, 250
// times; then every tap left must carry TapAlias. Before the fix the
// alias was set after TUNSETPERSIST, and kills in between left bare taps.
func TestHostReviewTapKilledMidCreate(t *testing.T) {
	if os.Getenv("NETCTL_REVIEW_TAP_CHILD") == "1" {
		for i := 0; ; i++ {
			name := fmt.Sprintf("rvk%d", i)
			ix, err := RealDevices{}.CreateTap(tapSpec(Interface{Kind: KindTap, Name: name}, NoOwner))
			if err == nil {
				RealDevices{}.DeleteLink(name, ix)
			}
			if i == 0 {
				os.Stdout.WriteString("looping\n")
			}
		}
	}
	testenv.Host(t)
	const rounds = 250
	bare, marked := 0, 0
	for round := 0; round < rounds; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHostReviewTapKilledMidCreate$")
		cmd.Env = append(os.Environ(), "NETCTL_REVIEW_TAP_CHILD=1")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
			t.Fatalf("the child did not start its loop: %v", err)
		}
		time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
		cmd.Process.Kill()
		cmd.Wait()
		ls, err := netlink.LinkList()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			if l.Type() != "tuntap" {
				continue
			}
			if l.Attrs().Alias == TapAlias {
				marked++
			} else {
				bare++
				t.Logf("round %d: tap %s left without the hook's alias", round, l.Attrs().Name)
			}
			netlink.LinkDel(l)
		}
	}
	t.Logf("taps left by the kills: %d with the alias, %d without", marked, bare)
	if bare > 0 {
		t.Errorf("%d of %d kills left a tap without the hook's alias", bare, rounds)
	}
}
