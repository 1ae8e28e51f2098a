package monitoring

import (
	"context"
	"encoding/json"
	"maps"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/test/guest"
	"github.com/netctl/netctl/test/prom"
	"github.com/netctl/netctl/test/qemutest"
)

// TestHostDashboardAndAlertsOnExporter runs the real thing: a guest (QEMU,
// 6.12 kernel, 2 vCPUs) with a 2-queue-pair NIC netctl attached that pings
// the host, netctl exporter (given also a --vm that does not run), and
// Debian's Prometheus scraping it with netctl-alerts.yml loaded; and a
// paused QEMU's NIC, whose rings are missing. Every alerting rule evaluates without an
// error (/api/v1/rules health ok: a join that matches many-to-many, say,
// fails only on real series), and every query of the dashboard (its
// variables' selectors too) runs; where the exporter serves every metric
// a query names (rings, vhost and vdpa need a running guest and the VM
// kernel), its answer is not empty and each series has the labels its
// legend shows.
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

	rules, body, err := ps.Rules()
	if err != nil {
		t.Fatal(err)
	}
	var rulesFile ruleFile
	readYAML(t, alertsFile, &rulesFile)
	want := 0
	for _, g := range rulesFile.Groups {
		want += len(g.Rules)
	}
	if len(rules) != want {
		t.Errorf("Prometheus loaded %d rules, %s has %d:\n%s", len(rules), alertsFile, want, body)
	}
	for _, r := range rules {
		if r.Health != "ok" || r.LastError != "" || !r.Evaluated {
			t.Errorf("rule %s: health %q, last error %q, evaluated %v", r.Name, r.Health, r.LastError, r.Evaluated)
		}
	}

	// Which netctl metrics Prometheus has from this exporter.
	have := map[string]bool{}
	samples, _, err := ps.Query(`count by (__name__) ({__name__=~"netctl_.+"})`)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range samples {
		have[s.Labels["__name__"]] = true
	}
	t.Logf("the exporter serves %d netctl metrics here", len(have))

	d := readDashboard(t)
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
	}
	type q struct{ what, expr, legend string }
	var qs []q
	for _, v := range d.Templating.List {
		if m := labelValues.FindStringSubmatch(v.Definition); m != nil {
			qs = append(qs, q{"variable " + v.Name, m[1], "{{" + m[2] + "}}"})
		}
	}
	walkPanels(d.Panels, func(p panel) {
		for _, tg := range p.Targets {
			qs = append(qs, q{p.Title + " " + tg.RefID, tg.Expr, tg.LegendFormat})
		}
	})
	for _, r := range rulesFile.Groups[0].Rules {
		qs = append(qs, q{"alert " + r.Alert, r.Expr, ""})
	}
	checked := 0
	absent := map[string]bool{}
	for _, x := range qs {
		expr := realVars.ReplaceAllStringFunc(x.expr, func(m string) string {
			if v, ok := realBuiltins[strings.Trim(m, "${}")]; ok {
				return v
			}
			return ".*"
		})
		got, body, err := ps.Query(expr)
		if err != nil {
			t.Errorf("%s: %s: %v", x.what, expr, err)
			continue
		}
		all := true
		for _, n := range metricName.FindAllString(expr, -1) {
			if !have[n] {
				all = false
				absent[n] = true
			}
		}
		if !all || strings.HasPrefix(x.what, "alert ") {
			continue // it ran; what it gives needs series this host cannot make, or is an alert's filter
		}
		checked++
		if len(got) == 0 {
			t.Errorf("%s: %s: no series, although the exporter serves each metric it names: %s", x.what, expr, body)
		}
		for _, s := range got {
			for _, m := range legendLabel.FindAllStringSubmatch(x.legend, -1) {
				if s.Labels[m[1]] == "" {
					t.Errorf("%s: %s: a series without %s, which its legend %q shows: %v", x.what, expr, m[1], x.legend, s.Labels)
				}
			}
		}
	}
	t.Logf("%d queries ran, %d of them on series this host has (answers and legends checked); not served here: %v", len(qs), checked, slices.Sorted(maps.Keys(absent)))
	if checked < 10 {
		b, _ := json.Marshal(have)
		t.Errorf("only %d queries had their metrics here (%s): the test checks too little", checked, b)
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

// realVars are Grafana's variables in a query; realBuiltins what stands
// in for the built-ins under a Prometheus that scrapes every 2 s.
var (
	realVars     = regexp.MustCompile(`\$\{?[a-zA-Z_][a-zA-Z0-9_]*\}?`)
	realBuiltins = map[string]string{"__rate_interval": "20s", "__interval": "2s", "__range": "1m"}
)
