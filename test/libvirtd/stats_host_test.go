package libvirtd_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/test/guest"
	"github.com/netctl/netctl/test/libvirtd"
	"github.com/netctl/netctl/test/prom"
)

// statsScript brings up the NIC the domain boots with.
const statsScript = `netctl-modprobe virtio_net
while [ ! -e /sys/class/net/eth0 ]; do sleep 1; done
ip link set eth0 up && ip addr add 10.79.1.2/24 dev eth0 && echo GUEST-NET-UP
sleep 3600
`

// statsJSON is the part of netctl stats --json the test reads.
type statsJSON struct {
	NICs []struct {
		VM, NIC, Link string
		Libvirt       string `json:"libvirt_domain"`
		Tainted       string `json:"tainted"`
		State         string `json:"state"`
		RX, TX        *struct {
			Packets float64 `json:"packets_per_second"`
		}
		Queues []struct {
			RX *float64 `json:"rx_descriptors_per_second"`
			TX *float64 `json:"tx_descriptors_per_second"`
		} `json:"queues"`
		Missing map[string]string `json:"missing"`
	} `json:"nics"`
}

// TestHostLibvirtdStatsDiagnose: netctl stats and diagnose on a running
// domain of the test's private libvirtd, whose <interface type='ethernet'>
// runs on a tap the test made (this host has no vhost-net: <driver
// name='qemu'>, 2 queues), named by the domain's name only:
//   - stats --vm DOMAIN finds the NIC through libvirt (alias net0, link
//     the tap) and its link counters move while the host pings the guest;
//     the rings say they need --qemu-monitor; nothing is tainted;
//   - diagnose --vm DOMAIN explains the NIC from the live XML (driver
//     qemu, 2 queues, the tap's vnet_hdr and queues) and lists what only
//     QEMU's monitor knows; libvirt's log of the domain has no
//     custom-monitor taint after both;
//   - netctl exporter --domain DOMAIN --libvirt URI, scraped by a real
//     Prometheus, serves the NIC (exporterUnderPrometheus), and still
//     nothing is tainted;
//   - diagnose --vm DOMAIN --qemu-monitor shows the guest-acked features
//     and says the domain is tainted, and libvirt's log says so too;
//   - stats --qemu-monitor then counts the rings through libvirt.
func TestHostLibvirtdStatsDiagnose(t *testing.T) {
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
	d := libvirtd.New(t)
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	const tap = "lvst0"
	if out, err := exec.Command("ip", "tuntap", "add", "dev", tap, "mode", "tap", "multi_queue", "vnet_hdr").CombinedOutput(); err != nil {
		t.Fatalf("ip tuntap add: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "link", "del", tap).Run() })
	g, err := d.NewGuest(ctx, "lvst", statsScript)
	if err != nil {
		t.Fatal(err)
	}
	iface := `    <interface type='ethernet'>
      <mac address='52:54:00:79:01:02'/>
      <target dev='` + tap + `' managed='no'/>
      <model type='virtio'/>
      <driver name='qemu' queues='2'/>
    </interface>`
	if out, err := d.Create(g, g.DomainXML("", iface)); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if _, err := g.WaitConsole(ctx, "GUEST-NET-UP"); err != nil {
		t.Fatal(err)
	}
	uuid, err := d.Virsh("domuuid", "lvst")
	if err != nil {
		t.Fatal(err)
	}
	uuid = strings.TrimSpace(uuid)
	guest.HostAddr(t, tap, "10.79.1.1/24")
	guest.HostPing(t, "10.79.1.2", 2)
	qemuLog := "/var/log/libvirt/qemu/lvst.log"
	tainted := func() bool {
		b, err := os.ReadFile(qemuLog)
		if err != nil {
			t.Fatalf("libvirt's log of the domain: %v", err)
		}
		return strings.Contains(string(b), "custom-monitor")
	}

	// stats: one sample pair 3 s apart, the host pinging the guest between.
	statsRun := func(args ...string) statsJSON {
		t.Helper()
		// Started from the test goroutine: netctl runs in the test's
		// network and mount namespaces (those of this thread).
		var b strings.Builder
		cmd := exec.CommandContext(ctx, bin, append([]string{"stats", "--vm", "lvst", "--interval", "3s", "--json"}, args...)...)
		cmd.Env = append(os.Environ(), "NETCTL_RUN_DIR="+run)
		cmd.Stdout, cmd.Stderr = &b, &b
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
		guest.HostPing(t, "10.79.1.2", 10)
		err := cmd.Wait()
		r := struct {
			out string
			err error
		}{b.String(), err}
		if r.err != nil {
			t.Fatalf("netctl stats %v: %v\n%s", args, r.err, r.out)
		}
		var s statsJSON
		if err := json.Unmarshal([]byte(r.out), &s); err != nil {
			t.Fatalf("netctl stats --json: %v\n%s", err, r.out)
		}
		t.Logf("netctl stats %v: %s", args, strings.TrimSpace(r.out))
		if len(s.NICs) != 1 {
			t.Fatalf("stats: %d NICs, want the domain's one:\n%s", len(s.NICs), r.out)
		}
		return s
	}
	s := statsRun()
	n := s.NICs[0]
	if n.NIC != "net0" || n.Link != tap || n.Libvirt != uuid || n.VM != "lvst" || n.State != "up" {
		t.Errorf("stats NIC %+v: want net0 on %s of domain %s", n, tap, uuid)
	}
	if n.RX == nil || n.TX == nil || n.RX.Packets <= 0 || n.TX.Packets <= 0 {
		t.Errorf("stats: link rates rx %+v tx %+v: want both moving while the guest answers pings", n.RX, n.TX)
	}
	if !strings.Contains(n.Missing["rings"], "--qemu-monitor") || n.Tainted != "" {
		t.Errorf("stats without --qemu-monitor: rings %q, tainted %q", n.Missing["rings"], n.Tainted)
	}

	out, err := netctl("diagnose", "--vm", "lvst")
	if err != nil {
		t.Fatalf("netctl diagnose --vm: %v\n%s", err, out)
	}
	t.Logf("netctl diagnose --vm lvst:\n%s", out)
	for _, want := range []string{"libvirt domain lvst (" + uuid + ")", "net0: ethernet " + tap + " (net0): driver qemu (QEMU's own virtio-net, no vhost), 2 queue(s)",
		// 1 queue attached: the guest has one vCPU, so its driver uses one of
		// the two pairs (QEMU detaches the other's tap queue).
		"mac 52:54:00:79:01:02, model virtio", "host tap " + tap + ": vnet_hdr yes, 1 queue(s) attached", "--qemu-monitor asks QEMU through libvirt", "acknowledged"} {
		if !strings.Contains(out, want) {
			t.Errorf("diagnose --vm: no %q", want)
		}
	}
	if tainted() {
		t.Fatalf("libvirt's log says custom-monitor after stats and diagnose without --qemu-monitor")
	}

	exporterUnderPrometheus(ctx, t, bin, run, uuid, tainted)

	out, err = netctl("diagnose", "--vm", "lvst", "--qemu-monitor", "--no-probe", "--json")
	if err != nil {
		t.Fatalf("netctl diagnose --qemu-monitor: %v\n%s", err, out)
	}
	var dj struct {
		Libvirt struct {
			Tainted bool `json:"tainted_custom_monitor"`
		} `json:"libvirt"`
		Explain *struct {
			NIC     string `json:"nic"`
			Backend string `json:"backend"`
			Status  []string
			Guest   struct{ Names []string } `json:"guest_features"`
		} `json:"explain"`
	}
	if err := json.Unmarshal([]byte(out), &dj); err != nil || dj.Explain == nil {
		t.Fatalf("diagnose --qemu-monitor --json: %v\n%s", err, out)
	}
	if !dj.Libvirt.Tainted || dj.Explain.NIC != "net0" || !slices.Contains(dj.Explain.Guest.Names, "MQ") {
		t.Errorf("diagnose --qemu-monitor: tainted %v, NIC %q, guest-acked %v (want MQ acked)", dj.Libvirt.Tainted, dj.Explain.NIC, dj.Explain.Guest.Names)
	}
	out, err = netctl("diagnose", "--vm", "lvst", "--qemu-monitor", "--no-probe")
	if err != nil || !strings.Contains(out, "tainted: custom-monitor") {
		t.Errorf("diagnose --qemu-monitor: %v: want the taint said\n%s", err, out)
	}
	t.Logf("netctl diagnose --vm lvst --qemu-monitor:\n%s", out)
	if !tainted() {
		t.Errorf("libvirt's log has no custom-monitor after --qemu-monitor")
	}

	s = statsRun("--qemu-monitor")
	n = s.NICs[0]
	if n.Tainted != "custom-monitor" || n.Missing["rings"] != "" || len(n.Queues) == 0 || n.Queues[0].TX == nil || *n.Queues[0].TX <= 0 {
		t.Errorf("stats --qemu-monitor: %+v: want the rings counted (tx descriptors moving) and the taint said", n)
	}
}

// exporterUnderPrometheus: netctl exporter --domain lvst --libvirt URI
// (no --qemu-monitor) in the test's namespaces, scraped every 2 s by a
// real Prometheus (Debian's). Through Prometheus's query API: the
// domain's target is up; its NIC net0 is up (vm lvst, nic net0, backend
// userspace, link the tap); the guest's receive and transmit counters
// grow while the host pings it; the rings are not counted (no ring
// series, netctl_source_up{source="rings"} 0 with reason no_monitor).
// libvirt's log of the domain has no custom-monitor taint after it. The
// exporter stops on SIGTERM with exit 0.
func exporterUnderPrometheus(ctx context.Context, t *testing.T, bin, run, uuid string, tainted func() bool) {
	t.Helper()
	const addr = "127.0.0.1:9469"
	h := prom.NewHTTP(t)
	ex := prom.StartExporter(t, h, bin, addr, append(os.Environ(), "NETCTL_RUN_DIR="+run),
		"--domain", "lvst", "--libvirt", libvirtd.URI, "--scrape-timeout", "10s")
	body, _ := ex.Scrape(t)
	t.Logf("netctl exporter --domain lvst:\n%s", body)
	prom.PromtoolCheck(t, body)
	ps := prom.Start(t, h, addr)

	nic := `vm="lvst",nic="net0",backend="userspace"`
	ps.Wait(ctx, t, `netctl_target_up{target="libvirt:lvst"}`, func(v float64) bool { return v == 1 })
	ps.Wait(ctx, t, `netctl_nic_up{`+nic+`}`, func(v float64) bool { return v == 1 })
	info := ps.WaitSample(ctx, t, `netctl_nic_info{`+nic+`}`, func(float64) bool { return true })
	if info.Labels["link"] != "lvst0" || info.Labels["libvirt_domain"] != uuid {
		t.Errorf("Prometheus: netctl_nic_info%v: want link lvst0 (the domain's tap) and libvirt_domain %s", info.Labels, uuid)
	}
	if v := ps.Wait(ctx, t, `netctl_nic_libvirt_tainted{`+nic+`}`, func(float64) bool { return true }); v != 0 {
		t.Errorf("Prometheus: netctl_nic_libvirt_tainted = %v without --qemu-monitor, want 0", v)
	}
	if v := ps.Wait(ctx, t, `netctl_nic_queue_pairs{`+nic+`}`, func(float64) bool { return true }); v != 2 {
		t.Errorf("Prometheus: netctl_nic_queue_pairs = %v, want 2 (<driver queues='2'>)", v)
	}

	// The link counters, as Prometheus has them, grow by the pings: the
	// guest receives each echo request and transmits each reply.
	rx := `netctl_link_receive_packets_total{` + nic + `,device="lvst0"}`
	tx := `netctl_link_transmit_packets_total{` + nic + `,device="lvst0"}`
	rx0 := ps.Wait(ctx, t, rx, func(float64) bool { return true })
	tx0 := ps.Wait(ctx, t, tx, func(float64) bool { return true })
	guest.HostPing(t, "10.79.1.2", 10)
	rx1 := ps.Wait(ctx, t, rx, func(v float64) bool { return v >= rx0+10 })
	tx1 := ps.Wait(ctx, t, tx, func(v float64) bool { return v >= tx0+10 })
	t.Logf("Prometheus: over 10 pings the guest received %.0f → %.0f and sent %.0f → %.0f packets", rx0, rx1, tx0, tx1)
	if rate := ps.Wait(ctx, t, `rate(`+rx+`[10s])`, func(float64) bool { return true }); rate <= 0 {
		t.Errorf("Prometheus: rate(%s[10s]) = %v, want > 0 just after the pings", rx, rate)
	}

	// No ring is counted without --qemu-monitor, and the exporter says
	// why as a code.
	ps.Wait(ctx, t, `netctl_source_up{`+nic+`,source="link"}`, func(v float64) bool { return v == 1 })
	ps.Wait(ctx, t, `netctl_source_up{`+nic+`,source="rings"}`, func(v float64) bool { return v == 0 })
	if samples, body, err := ps.Query(`netctl_queue_completed_descriptors_total{vm="lvst"}`); err != nil || len(samples) != 0 {
		t.Errorf("Prometheus: ring series without --qemu-monitor (%v): %s", err, body)
	}
	for _, src := range []string{"rings", "qmp"} {
		why, body, err := ps.Query(`netctl_source_missing_info{` + nic + `,source="` + src + `"}`)
		if err != nil || len(why) != 1 || why[0].Labels["reason"] != "no_monitor" {
			t.Errorf("Prometheus: netctl_source_missing_info{source=%q} (%v): %s: want one series, reason no_monitor (libvirt holds the monitor; --qemu-monitor not given)", src, err, body)
		}
	}
	if tainted() {
		t.Errorf("libvirt's log says custom-monitor after netctl exporter without --qemu-monitor")
	}
	ex.Stop(t, syscall.SIGTERM)
}
