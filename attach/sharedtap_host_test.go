package attach

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/test/qemutest"
)

// TestHostAttachSharedTapRefused: attach --tap NAME joined a multiqueue
// tap whose queues another process (another VM) holds: two VMs on one
// tap, and --mtu changed the other VM's link. It must refuse (ErrBusy,
// saying --shared-tap), change nothing on the tap, and join only when
// asked to (SharedTap). Before the fix it attached and set the MTU.
func TestHostAttachSharedTapRefused(t *testing.T) {
	testenv.Host(t)
	other, err := macvtap.CreateTap(macvtap.TapConfig{Name: "shtap0", VnetHdr: true, Queues: 2, Persistent: true})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Delete()
	sock, _ := qemutest.StartPaused(t, "shvm", "-machine", "q35", "-global", "ICH9-LPC.acpi-pci-hotplug-with-bridge-support=off",
		"-device", "pcie-root-port,id=rp1,bus=pcie.0,chassis=1")
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	_, err = Attach(ctx, Request{QMP: sock, ID: "sh1", Tap: "shtap0", Queues: 2, MTU: 1400, Backend: "userspace", StateDir: dir, Bus: "rp1"})
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "--shared-tap") {
		t.Errorf("attach --tap of a tap another process has queues on: %v; want ErrBusy pointing to --shared-tap", err)
	}
	if l, err := netlink.LinkByName("shtap0"); err != nil || l.Attrs().MTU != 1500 {
		t.Errorf("the other VM's tap after the refusal: %+v, %v; want MTU 1500 as it was", l, err)
	}
	if got := qemuHolds(t, sock); got != "device rp1" {
		t.Errorf("QEMU after the refusal holds %q", got)
	}

	if _, err := Attach(ctx, Request{QMP: sock, ID: "sh1", Tap: "shtap0", Queues: 2, Backend: "userspace", StateDir: dir, Bus: "rp1", SharedTap: true}); err != nil {
		t.Fatalf("attach --shared-tap: %v", err)
	}
	if err := Detach(ctx, DetachRequest{QMP: sock, ID: "sh1", StateDir: dir, Timeout: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if _, err := netlink.LinkByName("shtap0"); err != nil {
		t.Errorf("detach of a shared tap removed it: %v", err)
	}
}
