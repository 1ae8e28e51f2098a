package libvirtd_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/test/bench/result"
	"github.com/netctl/netctl/test/libvirtd"
)

// benchRounds: each side's figure is the median of this many
// interleaved rounds (result.MinRounds at least).
const benchRounds = 7

// BenchmarkLibvirtAttach is make bench's BENCH=libvirt (not a test: go
// test -run '^$' -bench BenchmarkLibvirtAttach -benchtime 1x, as root):
// on a running domain of a private libvirtd (this host: QEMU's userspace
// path), netctl attach --vm DOMAIN (decide, make the tap, record,
// virDomainAttachDeviceFlags) against what an operator does by hand on a
// tap made beforehand: virsh attach-device --live of the same kind of
// <interface type='ethernet'> (managed='no'); then netctl detach
// (virDomainDetachDeviceFlags, the device-removed event, the tap and
// record deleted) against virsh detach-device --live. Each side is a
// process start to exit, interleaved; two JSON lines (result.Print).
// NETCTL_BENCH_COMMIT and NETCTL_BENCH_LOAD fill in the commit and load.
func BenchmarkLibvirtAttach(b *testing.B) {
	if os.Getenv("NETCTL_BENCH") != "libvirt" {
		b.Skip("run by make bench BENCH=libvirt (NETCTL_BENCH=libvirt)")
	}
	testenv.Host(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	bin := buildNetctl(b, b.TempDir())
	run := b.TempDir()
	timed := func(name string, args ...string) float64 {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env = append(os.Environ(), "NETCTL_RUN_DIR="+run)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		d := time.Since(start)
		if err != nil {
			b.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return float64(d.Microseconds()) / 1000
	}
	d := libvirtd.New(b)
	if err := d.Start(ctx); err != nil {
		b.Fatal(err)
	}
	g, err := d.NewGuest(ctx, "lvbench", "echo GUEST-READY\nsleep 3600\n")
	if err != nil {
		b.Fatal(err)
	}
	if out, err := d.Create(g, g.DomainXML("")); err != nil {
		b.Fatalf("%v\n%s", err, out)
	}
	if _, err := g.WaitConsole(ctx, "GUEST-READY"); err != nil {
		b.Fatal(err)
	}
	// The operator's way: a tap made beforehand, the interface in a file.
	for _, args := range [][]string{{"tuntap", "add", "dev", "lvbtap", "mode", "tap", "vnet_hdr"}, {"link", "set", "lvbtap", "up"}} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			b.Fatalf("ip %v: %v\n%s", args, err, out)
		}
	}
	ifile := filepath.Join(g.Dir, "iface.xml")
	iface := `<interface type='ethernet'>
  <mac address='52:54:00:7b:00:02'/>
  <target dev='lvbtap' managed='no'/>
  <model type='virtio'/>
  <driver name='qemu'/>
  <alias name='ua-bench'/>
</interface>
`
	if err := os.WriteFile(ifile, []byte(iface), 0o644); err != nil {
		b.Fatal(err)
	}
	virsh := func(args ...string) float64 {
		return timed("virsh", append([]string{"-c", "qemu:///system"}, args...)...)
	}
	gone := func(dev string) {
		for i := 0; i < 100; i++ {
			if out, _ := d.Virsh("domiflist", "lvbench"); !strings.Contains(out, dev) {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		b.Fatalf("%s still in the domain", dev)
	}
	var na, nd, va, vd []float64
	for i := 0; i < benchRounds; i++ {
		id := fmt.Sprintf("nb%d", i)
		na = append(na, timed(bin, "attach", "--vm", "lvbench", "--id", id, "--mac", "52:54:00:7b:01:02"))
		nd = append(nd, timed(bin, "detach", "--vm", "lvbench", "--id", id))
		va = append(va, virsh("attach-device", "lvbench", ifile, "--live"))
		vd = append(vd, virsh("detach-device", "lvbench", ifile, "--live"))
		gone("lvbtap") // virsh detach-device may return before the removal
	}
	commit, load := os.Getenv("NETCTL_BENCH_COMMIT"), os.Getenv("NETCTL_BENCH_LOAD")
	for _, c := range []struct {
		what   string
		a, v   []float64
		aNote  string
		vNote  string
		bench  string
		detail string
	}{
		{"attach", na, va, "netctl attach --vm DOMAIN: probe, decide, tap nctlN made, record, virDomainAttachDeviceFlags",
			"virsh attach-device --live of <interface type='ethernet'> on a tap made beforehand", "libvirt_attach_netctl_vs_virsh", ""},
		{"detach", nd, vd, "netctl detach --vm DOMAIN: virDomainDetachDeviceFlags, device-removed, tap and record deleted",
			"virsh detach-device --live, then until domiflist no longer shows it", "libvirt_detach_netctl_vs_virsh", ""},
	} {
		l := result.Line{Bench: c.bench, Unit: "ms per " + c.what + " (process start to exit)",
			A: result.NewSide("netctl_"+c.what, c.a, 1, 3), B: result.NewSide("virsh_"+c.what+"_device", c.v, 1, 3),
			Goal: "ratio at most 1.2"}
		l.A.Note, l.B.Note = c.aNote, c.vNote
		l = result.Finish(l, commit, load)
		l.Meets = result.T(l.Ratio <= 1.2)
		l.Details = map[string]any{"domain": "TCG pc guest of a private libvirtd 9.0 on this host (userspace path)"}
		result.Print(l)
	}
}
