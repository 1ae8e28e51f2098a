package attach

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/policy/host"
	"github.com/netctl/netctl/test/qemutest"
)

// TestHostAttachDetachCycles: 100 attach/detach cycles, 8 workers across 4
// real QEMU 7.2 VMs (q35 with native PCIe hotplug and 8 root ports, so
// detach completes without a guest; attach picks the free port itself),
// under -race: every call succeeds and
// afterwards no QEMU holds a netctl client, device, fdset or fd name, no
// link is left in the namespace, no fd of the test process and no record.
// The host is probed once (the probe is not what is under test).
func TestHostAttachDetachCycles(t *testing.T) {
	testenv.Host(t)
	// Up to 8 NICs can be on one VM at once (8 workers, any VM): a
	// root port for each, or an attach finds none free.
	var socks []string
	args := []string{"-machine", "q35", "-global", "ICH9-LPC.acpi-pci-hotplug-with-bridge-support=off"}
	var ports []string
	for p := 1; p <= 8; p++ {
		args = append(args, "-device", fmt.Sprintf("pcie-root-port,id=rp%d,bus=pcie.0,chassis=%d", p, p))
		ports = append(ports, fmt.Sprintf("device rp%d", p))
	}
	for i := 0; i < 4; i++ {
		sock, _ := qemutest.StartPaused(t, fmt.Sprintf("cyc%d", i), args...)
		socks = append(socks, sock)
	}
	desc, err := RealHost{}.Probe(context.Background(), probeSpec)
	if err != nil {
		t.Fatal(err)
	}
	probe := func(context.Context) (*host.Description, error) { d := *desc; return &d, nil }
	dir := t.TempDir()
	fds := testenv.OpenFDs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	for w := 0; w < 8; w++ {
		wg.Add(1)
		// Workers run on other threads, outside the test's namespace:
		// testenv.Go puts them in it (the taps must be made there).
		testenv.Go(t, func() {
			defer wg.Done()
			for i := 0; ; i++ {
				mu.Lock()
				if done >= 100 {
					mu.Unlock()
					return
				}
				done++
				mu.Unlock()
				sock := socks[(w+i)%4]
				id := fmt.Sprintf("w%dn%d", w, i)
				if _, err := Attach(ctx, Request{QMP: sock, ID: id, Queues: 1 + i%2, StateDir: dir, Probe: probe}); err != nil {
					t.Errorf("attach %s: %v", id, err)
					continue
				}
				if err := Detach(ctx, DetachRequest{QMP: sock, ID: id, StateDir: dir, Timeout: 20 * time.Second}); err != nil {
					t.Errorf("detach %s: %v", id, err)
				}
			}
		})
	}
	wg.Wait()
	for _, s := range socks {
		if got := qemuHolds(t, s); got != strings.Join(ports, ", ") {
			t.Errorf("QEMU %s holds %q", s, got)
		}
	}
	if l := netctlLinks(t); len(l) != 0 {
		t.Errorf("links left: %v", l)
	}
	if n := testenv.OpenFDs(t); n != fds {
		t.Errorf("%d fds open, %d before", n, fds)
	}
	if r := records(t, dir); len(r) != 0 {
		t.Errorf("records left: %v", strings.Join(r, " "))
	}
}
