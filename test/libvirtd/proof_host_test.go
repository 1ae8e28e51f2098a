package libvirtd_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/test/guest"
	"github.com/netctl/netctl/test/libvirtd"
)

// proofHook is a stand-in for netctl's hook: it logs each call and, for
// every <target dev='X' managed='no'/>, creates tap X (multi_queue,
// vnet_hdr, no IPv6 link-local, up) at prepare and deletes it at release.
// While /run/proof-hook.fail exists it refuses prepare with that file's
// text.
const proofHook = `#!/bin/sh
LOG=/var/log/libvirt/proof-hook.log
xml=$(cat)
echo "$*" >> $LOG
devs=$(printf '%s\n' "$xml" | grep -o "<target dev='[^']*' managed='no'" | sed "s/<target dev='//; s/'.*//")
case "$2/$3" in
prepare/begin)
  if [ -e /run/proof-hook.fail ]; then echo "proof-hook: refusing $1: $(cat /run/proof-hook.fail)" >&2; exit 1; fi
  for d in $devs; do
    ip tuntap add dev "$d" mode tap multi_queue vnet_hdr || exit 1
    ip link set "$d" addrgenmode none && ip link set "$d" up || { ip link del "$d"; exit 1; }
  done;;
release/end)
  for d in $devs; do ip link del "$d" 2>/dev/null; done;;
esac
exit 0
`

const guestScript = `netctl-modprobe virtio_net
ip link set eth0 up && ip addr add 10.78.0.2/24 dev eth0 && ip addr add 10.78.1.2/24 dev eth0 && echo GUEST-NET-UP
sleep 3600
`

const tapIface = `    <interface type='ethernet'>
      <mac address='52:54:00:78:00:02'/>
      <target dev='lvtap0' managed='no'/>
      <model type='virtio'/>
      <driver name='qemu' queues='2'/>
    </interface>`

// TestHostLibvirtdHookProof proves the harness with a shell hook: the
// hook's tap carries a booted domain's pings, destroy runs release and the
// tap goes, and a hook that refuses prepare makes virsh fail with the
// hook's line, with no QEMU and no tap left.
func TestHostLibvirtdHookProof(t *testing.T) {
	testenv.Host(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	d := libvirtd.New(t)
	if err := os.WriteFile(filepath.Join(d.HookDir, "qemu.d", "10-proof"), []byte(proofHook), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	g, err := d.NewGuest(ctx, "proof", guestScript)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := d.Create(g, g.DomainXML("", tapIface)); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// The tap is the hook's: multi_queue and vnet_hdr as it made it.
	b, err := os.ReadFile("/sys/class/net/lvtap0/tun_flags")
	if err != nil {
		t.Fatalf("the hook's tap: %v", err)
	}
	flags, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(string(b)), "0x"), 16, 32)
	if err != nil {
		t.Fatal(err)
	}
	const iffTap, iffMultiQueue, iffVnetHdr = 0x2, 0x100, 0x4000
	if flags&(iffTap|iffMultiQueue|iffVnetHdr) != iffTap|iffMultiQueue|iffVnetHdr {
		t.Errorf("lvtap0 tun_flags %#x: want TAP|MULTI_QUEUE|VNET_HDR", flags)
	}
	if _, err := g.WaitConsole(ctx, "GUEST-NET-UP"); err != nil {
		t.Fatal(err)
	}
	guest.HostAddr(t, "lvtap0", "10.78.0.1/24")
	guest.HostPing(t, "10.78.0.2", 3)

	if out, err := d.Virsh("destroy", "proof"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if _, err := os.Stat("/sys/class/net/lvtap0"); !os.IsNotExist(err) {
		t.Errorf("lvtap0 after destroy: %v (want gone: release deletes it)", err)
	}
	wantCalls(t, d, []string{"proof prepare begin -", "proof start begin -", "proof started begin -", "proof stopped end -", "proof release end -"})

	// Refused at prepare: virsh fails with the hook's own line.
	if err := os.WriteFile("/run/proof-hook.fail", []byte("no such backend"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join("/var/log/libvirt", "proof-hook.log"), 0); err != nil {
		t.Fatal(err)
	}
	// A defined domain this time: virsh start, as an operator would.
	f := filepath.Join(g.Dir, "domain.xml")
	if err := os.WriteFile(f, []byte(g.DomainXML("", tapIface)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := d.Virsh("define", f); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	out, err := d.Virsh("start", "proof")
	if err == nil {
		t.Fatalf("virsh start succeeded with a hook that refuses prepare:\n%s", out)
	}
	if out, err := d.Virsh("undefine", "proof"); err != nil {
		t.Errorf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "proof-hook: refusing proof: no such backend") {
		t.Errorf("virsh's error lacks the hook's line:\n%s", out)
	}
	t.Logf("virsh start with the hook refusing: %s", strings.TrimSpace(out))
	if names, err := d.Running(); err != nil || len(names) != 0 {
		t.Errorf("running domains after the refusal: %v %v", names, err)
	}
	if _, err := os.Stat("/sys/class/net/lvtap0"); !os.IsNotExist(err) {
		t.Errorf("lvtap0 after the refusal: %v (want never made)", err)
	}
	// libvirt still runs release after a refused prepare.
	wantCalls(t, d, []string{"proof prepare begin -", "proof stopped end -", "proof release end -"})
}

func wantCalls(t *testing.T, d *libvirtd.Daemon, want []string) {
	t.Helper()
	b, err := os.ReadFile("/var/log/libvirt/proof-hook.log")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSpace(string(b)), "\n")
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("hook calls:\n got %q\nwant %q", got, want)
	}
}
