package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/test/prom"
	"github.com/netctl/netctl/test/qemutest"
)

// The exporter's host tests run netctl exporter as a child of the test
// goroutine, so that it lives in the test's network namespace (netlink
// answers for the namespace of the thread that asks; an in-process HTTP
// server's goroutines would ask from another thread).

// startExporter starts bin exporter on addr with args (see
// prom.StartExporter) and waits until /healthz answers.
func startExporter(t *testing.T, bin, addr string, args ...string) *prom.Exporter {
	t.Helper()
	return prom.StartExporter(t, prom.NewHTTP(t), bin, addr, nil, args...)
}

// TestHostExporterFaults: two paused QEMUs, one NIC netctl attached to
// each. The exporter's output passes promtool check metrics; a monitor
// held by another client costs that VM's NIC its QMP sources only
// (netctl_source_up{source="qmp"} 0, the reason says busy; it stays up on
// its link counters, and the other NIC is untouched); scrapes
// while the VM is killed all answer; after it, its NIC is down and the
// other NIC up, and the exporter keeps serving.
func TestHostExporterFaults(t *testing.T) {
	testenv.Host(t)
	if _, err := exec.LookPath("promtool"); err != nil {
		t.Fatalf("promtool: %v: run test/host-deps.sh (Debian's prometheus package)", err)
	}
	bin := netctlBinary(t)
	t.Setenv("NETCTL_RUN_DIR", t.TempDir())
	sockA, qemuA := qemutest.StartPaused(t, "expa")
	sockB, _ := qemutest.StartPaused(t, "expb")
	a := attachJSON(t, bin, "--qmp", sockA, "--id", "na")
	b := attachJSON(t, bin, "--qmp", sockB, "--id", "nb")
	ex := startExporter(t, bin, "127.0.0.1:9465", "--scrape-timeout", "10s")

	body, mfs := ex.Scrape(t)
	prom.PromtoolCheck(t, body)
	nicA := map[string]string{"vm": "expa", "nic": "na", "backend": a.Backend}
	nicB := map[string]string{"vm": "expb", "nic": "nb", "backend": b.Backend}
	for _, n := range []map[string]string{nicA, nicB} {
		if v, ok := prom.Value(mfs, "netctl_nic_up", n); !ok || v != 1 {
			t.Errorf("netctl_nic_up%v = %v (%v), want 1\n%s", n, v, ok, body)
		}
		if _, ok := prom.Value(mfs, "netctl_link_receive_packets_total", n); !ok {
			t.Errorf("no netctl_link_receive_packets_total%v", n)
		}
		if v, ok := prom.Value(mfs, "netctl_nic_queue_pairs", n); !ok || v != 1 {
			t.Errorf("netctl_nic_queue_pairs%v = %v", n, v)
		}
	}
	if v, ok := prom.Value(mfs, "netctl_target_up", map[string]string{"target": "state"}); !ok || v != 1 {
		t.Errorf("netctl_target_up{target=state} = %v %v", v, ok)
	}
	t.Logf("the exporter with two NICs:\n%s", body)

	// Between scrapes the exporter holds no QMP connection: both monitors
	// take a new client (QEMU serves one client per monitor socket; a held
	// one would refuse at once).
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	time.Sleep(300 * time.Millisecond) // a few --ring-sample periods after the scrape
	for _, sock := range []string{sockA, sockB} {
		c, err := qmp.Dial(ctx, sock)
		if err != nil {
			t.Fatalf("after a scrape, %s does not take a client: %v", sock, err)
		}
		c.Close()
	}

	// Another client holds A's monitor.
	hold, err := qmp.Dial(ctx, sockA)
	if err != nil {
		t.Fatal(err)
	}
	body, mfs = ex.Scrape(t)
	prom.PromtoolCheck(t, body)
	if v, _ := prom.Value(mfs, "netctl_nic_up", nicA); v != 1 {
		t.Errorf("A's monitor held: netctl_nic_up%v = %v, want 1 (the NIC is there; its link still counts)", nicA, v)
	}
	if v, _ := prom.Value(mfs, "netctl_source_up", prom.WithLabel(nicA, "source", "qmp")); v != 0 {
		t.Errorf("A's monitor held: netctl_source_up{source=qmp} = %v, want 0", v)
	}
	why := prom.LabelValue(mfs, "netctl_source_missing_info", prom.WithLabel(nicA, "source", "qmp"), "reason")
	if !strings.Contains(why, "busy") && !strings.Contains(why, "held") {
		t.Errorf("A's monitor held: reason %q does not say it is busy\n%s", why, body)
	}
	t.Logf("A's monitor held: %q", why)
	if _, ok := prom.Value(mfs, "netctl_link_receive_packets_total", nicA); !ok {
		t.Errorf("A's monitor held: its link counters went too (they need no QMP)")
	}
	if v, _ := prom.Value(mfs, "netctl_nic_up", nicB); v != 1 {
		t.Errorf("A's monitor held: B's netctl_nic_up = %v, want 1", v)
	}
	if v, _ := prom.Value(mfs, "netctl_source_up", prom.WithLabel(nicB, "source", "qmp")); v != 1 {
		t.Errorf("A's monitor held: B's netctl_source_up{source=qmp} = %v, want 1", v)
	}
	hold.Close()

	// Kill A while scraping: every scrape answers and parses.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var scrapes int
	var failures []string
	var mu sync.Mutex
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			code, body := ex.Get("/metrics")
			_, perr := prom.Parse(body)
			mu.Lock()
			scrapes++
			if code != 200 || perr != nil {
				failures = append(failures, fmt.Sprintf("%d %v", code, perr))
			}
			mu.Unlock()
		}
	}()
	time.Sleep(200 * time.Millisecond) // let scrapes run before and during the kill
	kill(t, qemuA)
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	if len(failures) > 0 || scrapes == 0 {
		t.Errorf("%d scrapes around the kill, failures: %v", scrapes, failures)
	}
	t.Logf("%d scrapes while A was killed, all answered", scrapes)

	body, mfs = ex.Scrape(t)
	prom.PromtoolCheck(t, body)
	if v, ok := prom.Value(mfs, "netctl_nic_up", nicA); !ok || v != 0 {
		t.Errorf("A killed: netctl_nic_up%v = %v (%v), want 0\n%s", nicA, v, ok, body)
	}
	if v, _ := prom.Value(mfs, "netctl_nic_up", nicB); v != 1 {
		t.Errorf("A killed: B's netctl_nic_up = %v, want 1", v)
	}
	t.Logf("A killed: reason %q", prom.LabelValue(mfs, "netctl_source_missing_info", prom.WithLabel(nicA, "source", "qmp"), "reason"))
	if !ex.Alive() {
		t.Fatalf("the exporter died:\n%s", ex.Stderr.String())
	}
	if code, h := ex.Get("/healthz"); code != 200 || h != "ok\n" {
		t.Errorf("/healthz after the kill: %d %q", code, h)
	}
}

// TestHostExporterRefusesRemote: a non-loopback --listen is refused
// (exit 2, says what to do) unless --allow-remote.
func TestHostExporterRefusesRemote(t *testing.T) {
	testenv.Host(t)
	bin := netctlBinary(t)
	r := execNetctl(t, bin, "exporter", "--listen", "0.0.0.0:9465")
	if r.code != 2 || !strings.Contains(r.stderr, "--allow-remote") || !strings.Contains(r.stderr, "127.0.0.1") {
		t.Errorf("--listen 0.0.0.0:9465: %+v", r)
	}
	t.Setenv("NETCTL_RUN_DIR", t.TempDir())
	ex := startExporter(t, bin, "0.0.0.0:9466", "--allow-remote")
	if _, mfs := ex.Scrape(t); mfs["netctl_scrape_nics"] == nil {
		t.Errorf("no netctl_scrape_nics with no NICs")
	}
}

// TestHostExporterVMFlag: --vm adds the NICs of a QEMU netctl did not
// attach (found over QMP: a virtio-net NIC on a tap QEMU opened itself,
// named from QEMU's fdinfo); a --vm that does not run is
// netctl_target_up 0 with the reason, and the rest is served.
func TestHostExporterVMFlag(t *testing.T) {
	testenv.Host(t)
	bin := netctlBinary(t)
	t.Setenv("NETCTL_RUN_DIR", t.TempDir())
	sock, _ := qemutest.StartPaused(t, "expc", "-netdev", "tap,id=t0,ifname=expctap,script=no,downscript=no",
		"-device", "virtio-net-pci,netdev=t0,id=nic0")
	ex := startExporter(t, bin, "127.0.0.1:9467", "--vm", "expc", "--vm", "nctl-no-such-vm")
	body, mfs := ex.Scrape(t)
	prom.PromtoolCheck(t, body)
	nic := map[string]string{"vm": "expc", "nic": "nic0"}
	if v, ok := prom.Value(mfs, "netctl_nic_up", nic); !ok || v != 1 {
		t.Errorf("netctl_nic_up%v = %v (%v), want 1\n%s", nic, v, ok, body)
	}
	if dev := prom.LabelValue(mfs, "netctl_link_receive_packets_total", nic, "device"); dev != "expctap" {
		t.Errorf("the NIC's link is %q, want expctap (QEMU's own tap)\n%s", dev, body)
	}
	if v, ok := prom.Value(mfs, "netctl_target_up", map[string]string{"target": "vm:expc"}); !ok || v != 1 {
		t.Errorf("netctl_target_up{target=vm:expc} = %v (%v)", v, ok)
	}
	if v, ok := prom.Value(mfs, "netctl_target_up", map[string]string{"target": "vm:nctl-no-such-vm"}); !ok || v != 0 {
		t.Errorf("netctl_target_up{target=vm:nctl-no-such-vm} = %v (%v), want 0", v, ok)
	}
	why := prom.LabelValue(mfs, "netctl_target_error_info", map[string]string{"target": "vm:nctl-no-such-vm"}, "reason")
	if why != "vm_gone" { // the words ("no VM named ...") are netctl stats's
		t.Errorf("the missing VM's reason: %q", why)
	}
	t.Logf("--vm nctl-no-such-vm: %q", why)

	// Another client holds expc's monitor, so --vm expc cannot be listed:
	// its NIC is still served from the last listing (up on its link, the
	// qmp source down saying busy), not taken for gone.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hold, err := qmp.Dial(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	body, mfs = ex.Scrape(t)
	prom.PromtoolCheck(t, body)
	if v, ok := prom.Value(mfs, "netctl_nic_up", nic); !ok || v != 1 {
		t.Errorf("expc's monitor held: netctl_nic_up%v = %v (%v), want 1 (its link still counts)\n%s", nic, v, ok, body)
	}
	if _, ok := prom.Value(mfs, "netctl_link_receive_packets_total", nic); !ok {
		t.Errorf("expc's monitor held: its link counters went (they need no QMP)\n%s", body)
	}
	if v, ok := prom.Value(mfs, "netctl_source_up", prom.WithLabel(nic, "source", "qmp")); !ok || v != 0 {
		t.Errorf("expc's monitor held: netctl_source_up{source=qmp} = %v (%v), want 0", v, ok)
	}
	if why := prom.LabelValue(mfs, "netctl_source_missing_info", prom.WithLabel(nic, "source", "qmp"), "reason"); !strings.Contains(why, "busy") {
		t.Errorf("expc's monitor held: the qmp reason %q does not say busy", why)
	}
	if v, ok := prom.Value(mfs, "netctl_target_up", map[string]string{"target": "vm:expc"}); !ok || v != 0 {
		t.Errorf("expc's monitor held: netctl_target_up{target=vm:expc} = %v (%v), want 0", v, ok)
	}
	t.Logf("expc's monitor held: target %q", prom.LabelValue(mfs, "netctl_target_error_info", map[string]string{"target": "vm:expc"}, "reason"))
}

// TestHostExporterHungVM: a --qmp VM whose monitor greets but never
// answers a command costs only itself: the other VM's NIC is listed and
// sampled within the same scrape (the listings do not queue behind the
// hung one and leave the collection time of their own).
func TestHostExporterHungVM(t *testing.T) {
	testenv.Host(t)
	bin := netctlBinary(t)
	t.Setenv("NETCTL_RUN_DIR", t.TempDir())
	sock, _ := qemutest.StartPaused(t, "exphung", "-netdev", "tap,id=t0,ifname=exphtap,script=no,downscript=no",
		"-device", "virtio-net-pci,netdev=t0,id=nic0")
	hung := qemutest.HungQMP(t)
	ex := startExporter(t, bin, "127.0.0.1:9468", "--scrape-timeout", "4s", "--qmp", hung, "--qmp", sock)
	body, mfs := ex.Scrape(t)
	prom.PromtoolCheck(t, body)
	nic := map[string]string{"vm": "exphung", "nic": "nic0"}
	if v, ok := prom.Value(mfs, "netctl_nic_up", nic); !ok || v != 1 {
		t.Errorf("the answering VM's netctl_nic_up%v = %v (%v), want 1\n%s", nic, v, ok, body)
	}
	if _, ok := prom.Value(mfs, "netctl_link_receive_packets_total", nic); !ok {
		t.Errorf("the answering VM's NIC has no link counters\n%s", body)
	}
	if v, ok := prom.Value(mfs, "netctl_target_up", map[string]string{"target": "qmp:" + hung}); !ok || v != 0 {
		t.Errorf("netctl_target_up{target=qmp:%s} = %v (%v), want 0", hung, v, ok)
	}
	t.Logf("the hung VM: %q", prom.LabelValue(mfs, "netctl_target_error_info", map[string]string{"target": "qmp:" + hung}, "reason"))
}
