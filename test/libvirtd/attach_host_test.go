package libvirtd_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/state"
	"github.com/netctl/netctl/test/guest"
	"github.com/netctl/netctl/test/libvirtd"
)

// hotplugScript waits for the NIC netctl hotplugs and puts an address on it.
const hotplugScript = `netctl-modprobe virtio_net
echo GUEST-READY
while [ ! -e /sys/class/net/eth0 ]; do sleep 1; done
ip link set eth0 up && ip addr add 10.79.0.2/24 dev eth0 && echo GUEST-NET-UP
sleep 3600
`

// TestHostLibvirtdAttach: netctl attach and detach on a running libvirt
// domain of the test's private libvirtd, through the netctl binary (this
// host has no vhost-net: the userspace path, libvirt's <driver
// name='qemu'>):
//   - attach --vm DOMAIN without --libvirt finds that libvirt runs the VM
//     and goes through libvirt: virsh domiflist shows netctl's tap (a
//     multiqueue vnet_hdr tap with netctl's mark), the guest sees the
//     hotplug and answers pings across it; the record is keyed by the
//     domain's UUID;
//   - a MAC the domain already has is refused before anything is made;
//     libvirt's own refusal (--persistent on a transient domain) comes back
//     with libvirt's message after the tap was made, and the tap and the
//     record are gone again;
//   - gc leaves the libvirt domain's NIC alone;
//   - detach unplugs it through libvirt (device-removed) and deletes the
//     tap and the record; after virsh destroy, detach cleans up what is left.
func TestHostLibvirtdAttach(t *testing.T) {
	testenv.Host(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := buildNetctl(t, t.TempDir())
	run := t.TempDir()
	netctl := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = append(os.Environ(), "NETCTL_RUN_DIR="+run)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	records := func() []string {
		m, _ := filepath.Glob(filepath.Join(run, "nics", "*.json"))
		return m
	}
	taps := func() []string {
		m, _ := filepath.Glob("/sys/class/net/nctl*")
		return m
	}

	d := libvirtd.New(t)
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	g, err := d.NewGuest(ctx, "lvatt", hotplugScript)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := d.Create(g, g.DomainXML("")); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if _, err := g.WaitConsole(ctx, "GUEST-READY"); err != nil {
		t.Fatal(err)
	}
	uuid, err := d.Virsh("domuuid", "lvatt")
	if err != nil {
		t.Fatal(err)
	}
	uuid = strings.TrimSpace(uuid)

	out, err := netctl("attach", "--vm", "lvatt", "--id", "net1", "--mac", "52:54:00:79:00:02", "--queues", "2", "--json")
	if err != nil {
		t.Fatalf("netctl attach: %v\n%s", err, out)
	}
	var nic state.NIC
	if err := json.Unmarshal([]byte(out), &nic); err != nil {
		t.Fatalf("attach --json: %v\n%s", err, out)
	}
	if nic.Libvirt == nil || nic.Libvirt.UUID != uuid || nic.Libvirt.Alias != "ua-netctl-net1" || nic.Tap == nil || !strings.HasPrefix(nic.Tap.Name, "nctl") || nic.Backend != "userspace" || nic.Queues != 2 {
		t.Fatalf("the record: %s", out)
	}
	tap := nic.Tap.Name
	if recs := records(); len(recs) != 1 || filepath.Base(recs[0]) != "lv="+uuid+"@net1.json" {
		t.Errorf("records %v: want one, keyed by the domain's UUID", recs)
	}
	if out, err := d.Virsh("domiflist", "lvatt"); err != nil || !strings.Contains(out, tap) || !strings.Contains(out, "52:54:00:79:00:02") {
		t.Errorf("virsh domiflist: %v\n%s", err, out)
	}
	if b, err := os.ReadFile("/sys/class/net/" + tap + "/tun_flags"); err != nil {
		t.Error(err)
	} else if f, _ := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(string(b)), "0x"), 16, 32); f&0x4102 != 0x4102 {
		t.Errorf("%s tun_flags %#x: want TAP|MULTI_QUEUE|VNET_HDR", tap, f)
	}
	if b, _ := os.ReadFile("/sys/class/net/" + tap + "/ifalias"); strings.TrimSpace(string(b)) != "netctl hook tap" {
		t.Errorf("%s alias %q: want netctl's mark", tap, b)
	}
	if _, err := g.WaitConsole(ctx, "GUEST-NET-UP"); err != nil {
		t.Fatal(err)
	}
	guest.HostAddr(t, tap, "10.79.0.1/24")
	guest.HostPing(t, "10.79.0.2", 3)
	if out, err := netctl("list", "--vm", "lvatt"); err != nil || !strings.Contains(out, "lvatt (libvirt)") || !strings.Contains(out, "attached  yes") {
		t.Errorf("netctl list: %v\n%s (want the NIC, present in the domain)", err, out)
	}

	// Refused before anything is made: a MAC the domain has.
	if out, err := netctl("attach", "--vm", "lvatt", "--libvirt", "qemu:///system", "--id", "net2", "--mac", "52:54:00:79:00:02"); err == nil || !strings.Contains(out, "already has an interface with MAC") {
		t.Errorf("attach with a MAC in use: %v\n%s", err, out)
	}
	// Refused by libvirt itself after the tap was made: undone.
	out, err = netctl("attach", "--vm", "lvatt", "--id", "net3", "--persistent")
	if err == nil || !strings.Contains(out, "transient") {
		t.Errorf("attach --persistent to a transient domain: %v\n%s (want libvirt's refusal)", err, out)
	}
	t.Logf("libvirt's refusal: %s", strings.TrimSpace(out))
	if got := taps(); len(got) != 1 {
		t.Errorf("taps after the refusals: %v (want only %s)", got, tap)
	}
	if recs := records(); len(recs) != 1 {
		t.Errorf("records after the refusals: %v", recs)
	}

	// gc leaves a libvirt domain's NIC alone.
	if out, err := netctl("gc"); err != nil || !strings.Contains(out, "libvirt") {
		t.Errorf("netctl gc: %v\n%s", err, out)
	}
	if _, err := os.Stat("/sys/class/net/" + tap); err != nil || len(records()) != 1 {
		t.Errorf("after gc: tap %v, records %v", err, records())
	}

	// A NIC netctl does not have: a failure (exit 1) that says so, not a
	// usage error pointing at --help (review: it was exit 2).
	out, err = netctl("detach", "--vm", "lvatt", "--id", "nosuch")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(out, "netctl has no NIC nosuch") || strings.Contains(out, "--help") {
		t.Errorf("netctl detach --id nosuch: %v (want exit 1 saying netctl has no NIC nosuch, no --help hint)\n%s", err, out)
	}
	if out, err := netctl("detach", "--vm", "lvatt", "--id", "net1"); err != nil {
		t.Fatalf("netctl detach: %v\n%s", err, out)
	}
	if _, err := os.Stat("/sys/class/net/" + tap); !os.IsNotExist(err) {
		t.Errorf("%s after detach: %v", tap, err)
	}
	if recs := records(); len(recs) != 0 {
		t.Errorf("records after detach: %v", recs)
	}
	if out, err := d.Virsh("domiflist", "lvatt"); err != nil || strings.Contains(out, tap) {
		t.Errorf("virsh domiflist after detach: %v\n%s", err, out)
	}

	// Destroyed under an attached NIC: detach cleans up what is left.
	out, err = netctl("attach", "--vm", uuid, "--libvirt", "qemu:///system", "--id", "net4", "--json")
	if err != nil {
		t.Fatalf("netctl attach by UUID: %v\n%s", err, out)
	}
	if err := json.Unmarshal([]byte(out), &nic); err != nil || nic.Tap == nil {
		t.Fatalf("attach --json: %v\n%s", err, out)
	}
	if out, err := d.Virsh("destroy", "lvatt"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := netctl("list"); err != nil || !strings.Contains(out, "gone (libvirt has no domain "+uuid) {
		t.Errorf("netctl list after destroy: %v\n%s", err, out)
	}
	if out, err := netctl("detach", "--vm", "lvatt", "--id", "net4"); err != nil {
		t.Fatalf("netctl detach after destroy: %v\n%s", err, out)
	}
	if got := taps(); len(got) != 0 {
		t.Errorf("taps after detach of a destroyed domain's NIC: %v", got)
	}
	if recs := records(); len(recs) != 0 {
		t.Errorf("records after detach of a destroyed domain's NIC: %v", recs)
	}
}
