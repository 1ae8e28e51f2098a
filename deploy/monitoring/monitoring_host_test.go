package monitoring

import (
	"context"
	"encoding/json"
	"net"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/test/guest"
	"github.com/netctl/netctl/test/prom"
	"github.com/netctl/netctl/test/qemutest"
)

// TestHostDashboardAndAlertsOnExporter runs the real thing: a guest (QEMU,
// 6.12 kernel, 2 vCPUs) with a 2-queue-pair NIC netctl attached that pings
// the host, a paused QEMU's NIC (its rings missing), netctl exporter
// (given also a --vm that does not run), and Debian's Prometheus scraping
// it with netctl-alerts.yml loaded. Every alerting rule evaluates without
// an error (/api/v1/rules health ok: a join that matches many-to-many,
// say, fails only on real series), and every query of the dashboard (its
// variables' selectors too) runs; where the exporter serves every metric
// a query names (vhost and vdpa need the VM kernel: TestVMWorkerQueries),
// its answer is not empty and each series has the labels its legend
// shows. Then NetctlNICDown's expression is held to a NIC that went down
// and one that went away.
func TestHostDashboardAndAlertsOnExporter(t *testing.T) {
	testenv.Host(t)
	promtool(t)
	bin := filepath.Join(t.TempDir(), "netctl")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/netctl/netctl/cmd/netctl").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Setenv("NETCTL_RUN_DIR", t.TempDir())
	t.Setenv("TMPDIR", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// A guest whose NIC moves packets: its rings are counted (the queue
	// panels' series); this host has no vhost-net (no worker CPU) and no
	// vdpa.
	g, err := guest.Boot(ctx, guest.Options{SMP: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	mac := net.HardwareAddr{0x52, 0x54, 0, 0x97, 0, 2}
	out, err := exec.Command(bin, "attach", "--json", "--qmp", g.QMP(), "--id", "mon0", "--mac", mac.String(), "--queues", "2").CombinedOutput()
	if err != nil {
		t.Fatalf("netctl attach: %v\n%s", err, out)
	}
	var nic struct{ Tap struct{ Name string } }
	if err := json.Unmarshal(out, &nic); err != nil || nic.Tap.Name == "" {
		t.Fatalf("netctl attach --json: %v: %s", err, out)
	}
	ifname, err := g.WaitNIC(ctx, mac)
	if err != nil {
		t.Fatal(err)
	}
	guest.HostAddr(t, nic.Tap.Name, "10.97.0.1/24")
	if err := g.SetAddr(ctx, ifname, "10.97.0.2/24"); err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithCancel(ctx)
	pinged := make(chan struct{})
	go func() {
		defer close(pinged)
		g.Exec(pctx, "ping -q -c 100000 -i 0.1 10.97.0.1")
	}()
	defer func() { pcancel(); <-pinged }()
	// A paused QEMU's NIC: its guest never started the driver, so its rings
	// source is missing with a reason (the sources-missing panels' series).
	paused, pausedQEMU := qemutest.StartPaused(t, "monpaused")
	if out, err := exec.Command(bin, "attach", "--json", "--qmp", paused, "--id", "mon1").CombinedOutput(); err != nil {
		t.Fatalf("netctl attach: %v\n%s", err, out)
	}
	h := prom.NewHTTP(t)
	prom.StartExporter(t, h, bin, "127.0.0.1:9465", nil, "--vm", "nctl-no-such-vm")
	alerts, err := filepath.Abs(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	ps := prom.StartRules(t, h, "127.0.0.1:9465", alerts)

	// Enough scrapes for a rate over 20 s, and rule evaluations after them.
	ps.Wait(ctx, t, `count_over_time(netctl_scrape_duration_seconds[20s])`, func(v float64) bool { return v >= 6 })
	ps.Wait(ctx, t, `netctl_target_up{target="vm:nctl-no-such-vm"}`, func(v float64) bool { return v == 0 })
	ps.Wait(ctx, t, `sum(rate(netctl_queue_completed_descriptors_total{nic="mon0"}[20s]))`, func(v float64) bool { return v > 0 })
	time.Sleep(5 * time.Second) // two rule evaluations over these series

	rulesFile, checked, absent := checkOnPrometheus(t, ps)
	if checked < 10 {
		t.Errorf("only %d queries had their metrics here (not served: %v): the test checks too little", checked, absent)
	}

	// NetctlNICDown tells a NIC that went down from one that went away:
	// the paused QEMU killed, its NIC is still in netctl's state (down,
	// with its sources' series) and is alerted on; the guest's NIC
	// detached is no longer listed (down, no source series: an intended
	// stop) and is not.
	pausedQEMU.Process.Kill()
	for try := 0; ; try++ {
		out, err := exec.Command(bin, "detach", "--qmp", g.QMP(), "--id", "mon0").CombinedOutput()
		if err == nil {
			break
		}
		if try == 10 { // the exporter may hold the monitor for a scrape
			t.Fatalf("netctl detach: %v\n%s", err, out)
		}
		time.Sleep(300 * time.Millisecond)
	}
	ps.Wait(ctx, t, `sum(netctl_nic_up{nic=~"mon0|mon1"})`, func(v float64) bool { return v == 0 })
	ps.Wait(ctx, t, `count(netctl_source_up{nic="mon0"}) or vector(0)`, func(v float64) bool { return v == 0 })
	var down string
	for _, r := range rulesFile.Groups[0].Rules {
		if r.Alert == "NetctlNICDown" {
			down = r.Expr
		}
	}
	got, body, err := ps.Query(down)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Labels["nic"] != "mon1" || got[0].Labels["vm"] != "monpaused" {
		t.Errorf("NetctlNICDown's expression with monpaused killed and mon0 detached gives %v, want monpaused's mon1 alone: %s", got, body)
	}
	if samples, _, _ := ps.Query(`netctl_source_missing_info{nic="mon1"}`); len(samples) > 0 {
		t.Logf("monpaused killed: %s missing: %s", samples[0].Labels["source"], samples[0].Labels["reason"])
	}
}
