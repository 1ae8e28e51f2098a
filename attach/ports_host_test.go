package attach

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/policy/host"
	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/test/qemutest"
)

// TestHostFirstFreePort: on a q35 QEMU with 20 root ports (ids sorted as
// strings: rp01..rp20) whose first 3 hold a device netctl did not plug,
// each attach takes the first free port, across freePorts' growing chunks (1, 2, 4, 8, 8);
// a port freed in the middle is the next one taken; with every port
// taken, attach says so and changes nothing.
func TestHostFirstFreePort(t *testing.T) {
	testenv.Host(t)
	args := []string{"-machine", "q35", "-global", "ICH9-LPC.acpi-pci-hotplug-with-bridge-support=off"}
	for p := 1; p <= 20; p++ {
		args = append(args, "-device", fmt.Sprintf("pcie-root-port,id=rp%02d,bus=pcie.0,chassis=%d", p, p))
	}
	for p := 1; p <= 3; p++ {
		args = append(args, "-netdev", fmt.Sprintf("user,id=u%d", p), "-device", fmt.Sprintf("virtio-net-pci,netdev=u%d,id=user%d,bus=rp%02d", p, p, p))
	}
	sock, _ := qemutest.StartPaused(t, "ports", args...)
	desc, err := RealHost{}.Probe(context.Background(), probeSpec)
	if err != nil {
		t.Fatal(err)
	}
	probe := func(context.Context) (*host.Description, error) { d := *desc; return &d, nil }
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bus := func(id string) string {
		c, err := qmp.Dial(ctx, sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var parent string
		if err := c.Run(ctx, "qom-get", map[string]string{"path": "/machine/peripheral/" + id, "property": "parent_bus"}, &parent); err != nil {
			t.Fatalf("parent_bus of %s: %v", id, err)
		}
		return parent
	}
	for i := 4; i <= 20; i++ {
		id := fmt.Sprintf("n%d", i)
		if _, err := Attach(ctx, Request{QMP: sock, ID: id, StateDir: dir, Probe: probe}); err != nil {
			t.Fatalf("attach %s: %v", id, err)
		}
		if got, want := bus(id), fmt.Sprintf("/machine/peripheral/rp%02d/rp%02d", i, i); got != want {
			t.Fatalf("NIC %s is on %s, want the first free port %s", id, got, want)
		}
	}
	if err := Detach(ctx, DetachRequest{QMP: sock, ID: "n11", StateDir: dir, Timeout: 20 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if _, err := Attach(ctx, Request{QMP: sock, ID: "again", StateDir: dir, Probe: probe}); err != nil {
		t.Fatal(err)
	}
	if got := bus("again"); got != "/machine/peripheral/rp11/rp11" {
		t.Fatalf("after detaching rp11's NIC the next attach went to %s", got)
	}
	_, err = Attach(ctx, Request{QMP: sock, ID: "full", StateDir: dir, Probe: probe})
	if !errors.Is(err, ErrNotAvailable) || !strings.Contains(err.Error(), "no free one") {
		t.Fatalf("attach with every root port taken: %v", err)
	}
	recs, err := List(ctx, ListRequest{StateDir: dir})
	if err != nil || len(recs) != 17 {
		t.Fatalf("records after the refused attach: %d, %v; want the 17 attached", len(recs), err)
	}
}
