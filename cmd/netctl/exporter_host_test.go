package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/test/qemutest"
)

// The exporter's host tests run netctl exporter as a child of the test
// goroutine, so that it lives in the test's network namespace (netlink
// answers for the namespace of the thread that asks; an in-process HTTP
// server's goroutines would ask from another thread).

// exporterProc is a running netctl exporter.
type exporterProc struct {
	url     string // http://127.0.0.1:PORT
	cmd     *exec.Cmd
	stderr  *syncBuf
	exited  chan error
	stopped bool // stop ran (the test goroutine's)
}

// stop ends the exporter now (SIGINT) and checks that it exited 0.
func (p *exporterProc) stop(t *testing.T) {
	t.Helper()
	p.stopped = true
	p.cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-p.exited:
		if err != nil {
			t.Errorf("netctl exporter exited with %v on SIGINT:\n%s", err, p.stderr.String())
		}
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
		t.Errorf("netctl exporter did not stop on SIGINT:\n%s", p.stderr.String())
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startExporter starts bin exporter on addr with args and waits until
// /healthz answers; the test's cleanup stops it (SIGTERM, then checks it
// exited 0).
func startExporter(t *testing.T, bin, addr string, args ...string) *exporterProc {
	t.Helper()
	useNetNS(t)
	p := &exporterProc{url: "http://" + addr, stderr: &syncBuf{}}
	p.cmd = exec.Command(bin, append([]string{"exporter", "--listen", addr}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.stderr, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	p.exited = exited
	go func() { exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		if p.stopped {
			return
		}
		select {
		case <-p.exited:
			return // it exited by itself: its test says whether that was right
		default:
		}
		p.stop(t)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		if code, body := httpGet(t, p.url+"/healthz"); code == 200 && body == "ok\n" {
			return p
		}
		select {
		case err := <-exited:
			t.Fatalf("netctl exporter exited: %v\n%s", err, p.stderr.String())
		case <-ctx.Done():
			t.Fatalf("netctl exporter's /healthz never answered:\n%s", p.stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// alive says whether the exporter process still runs.
func (p *exporterProc) alive() bool { return p.cmd.Process.Signal(syscall.Signal(0)) == nil }

// nsClients are HTTP clients whose connections are made in a test's
// network namespace, by the file of that namespace.
var nsClients sync.Map // *os.File -> *http.Client

// testNetNS is the calling thread's network namespace (call it from the
// test goroutine after testenv.Host), kept open until the test ends.
func testNetNS(t *testing.T) *os.File {
	t.Helper()
	f, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nsClients.Delete(f); f.Close() })
	return f
}

// nsHTTPClient dials from a thread that joined ns: net/http dials on
// goroutines of its own, which would connect from the machine's
// namespace. The dialing goroutine stays locked and ends, so its thread
// (in ns) is thrown away.
func nsHTTPClient(ns *os.File) *http.Client {
	if c, ok := nsClients.Load(ns); ok {
		return c.(*http.Client)
	}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		type res struct {
			c   net.Conn
			err error
		}
		ch := make(chan res, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
				ch <- res{nil, fmt.Errorf("setns: %w", err)}
				return
			}
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			ch <- res{c, err}
		}()
		r := <-ch
		return r.c, r.err
	}
	c := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}
	nsClients.Store(ns, c)
	return c
}

// curNS is the namespace file the test's HTTP requests use.
var curNS struct {
	sync.Mutex
	f *os.File
}

func useNetNS(t *testing.T) {
	f := testNetNS(t)
	curNS.Lock()
	curNS.f = f
	curNS.Unlock()
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	curNS.Lock()
	f := curNS.f
	curNS.Unlock()
	if f == nil {
		t.Fatal("httpGet before useNetNS")
	}
	resp, err := nsHTTPClient(f).Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return resp.StatusCode, string(b)
}

// scrape gets /metrics and parses it; a scrape that fails or does not
// parse fails the test.
func (p *exporterProc) scrape(t *testing.T) (string, map[string]*dto.MetricFamily) {
	t.Helper()
	code, body := httpGet(t, p.url+"/metrics")
	if code != 200 {
		t.Fatalf("GET /metrics: %d %s\nexporter:\n%s", code, body, p.stderr.String())
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v\n%s", err, body)
	}
	return body, mfs
}

// value finds the sample of family name whose labels include want.
func value(mfs map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	mf := mfs[name]
	if mf == nil {
		return 0, false
	}
next:
	for _, m := range mf.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Untyped != nil:
			return m.GetUntyped().GetValue(), true
		}
	}
	return 0, false
}

// labelValue is the value of label of the first sample of name whose
// labels include want.
func labelValue(mfs map[string]*dto.MetricFamily, name string, want map[string]string, label string) string {
	mf := mfs[name]
	if mf == nil {
		return ""
	}
next:
	for _, m := range mf.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		return have[label]
	}
	return ""
}

// promtoolCheck runs promtool check metrics on body (Debian's prometheus
// package; test/host-deps.sh installs it) and fails the test on any
// complaint.
func promtoolCheck(t *testing.T, body string) {
	t.Helper()
	cmd := exec.Command("promtool", "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) != 0 {
		t.Errorf("promtool check metrics: %v\n%s\n--- the metrics:\n%s", err, out, body)
	}
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

	body, mfs := ex.scrape(t)
	promtoolCheck(t, body)
	nicA := map[string]string{"vm": "expa", "nic": "na", "backend": a.Backend}
	nicB := map[string]string{"vm": "expb", "nic": "nb", "backend": b.Backend}
	for _, n := range []map[string]string{nicA, nicB} {
		if v, ok := value(mfs, "netctl_nic_up", n); !ok || v != 1 {
			t.Errorf("netctl_nic_up%v = %v (%v), want 1\n%s", n, v, ok, body)
		}
		if _, ok := value(mfs, "netctl_link_receive_packets_total", n); !ok {
			t.Errorf("no netctl_link_receive_packets_total%v", n)
		}
		if v, ok := value(mfs, "netctl_nic_queue_pairs", n); !ok || v != 1 {
			t.Errorf("netctl_nic_queue_pairs%v = %v", n, v)
		}
	}
	if v, ok := value(mfs, "netctl_target_up", map[string]string{"target": "state"}); !ok || v != 1 {
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
	body, mfs = ex.scrape(t)
	promtoolCheck(t, body)
	if v, _ := value(mfs, "netctl_nic_up", nicA); v != 1 {
		t.Errorf("A's monitor held: netctl_nic_up%v = %v, want 1 (the NIC is there; its link still counts)", nicA, v)
	}
	if v, _ := value(mfs, "netctl_source_up", withLabel(nicA, "source", "qmp")); v != 0 {
		t.Errorf("A's monitor held: netctl_source_up{source=qmp} = %v, want 0", v)
	}
	why := labelValue(mfs, "netctl_source_missing_info", withLabel(nicA, "source", "qmp"), "reason")
	if !strings.Contains(why, "busy") && !strings.Contains(why, "held") {
		t.Errorf("A's monitor held: reason %q does not say it is busy\n%s", why, body)
	}
	t.Logf("A's monitor held: %q", why)
	if _, ok := value(mfs, "netctl_link_receive_packets_total", nicA); !ok {
		t.Errorf("A's monitor held: its link counters went too (they need no QMP)")
	}
	if v, _ := value(mfs, "netctl_nic_up", nicB); v != 1 {
		t.Errorf("A's monitor held: B's netctl_nic_up = %v, want 1", v)
	}
	if v, _ := value(mfs, "netctl_source_up", withLabel(nicB, "source", "qmp")); v != 1 {
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
			code, body := httpGet(t, ex.url+"/metrics")
			parser := expfmt.NewTextParser(model.LegacyValidation)
			_, perr := parser.TextToMetricFamilies(strings.NewReader(body))
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

	body, mfs = ex.scrape(t)
	promtoolCheck(t, body)
	if v, ok := value(mfs, "netctl_nic_up", nicA); !ok || v != 0 {
		t.Errorf("A killed: netctl_nic_up%v = %v (%v), want 0\n%s", nicA, v, ok, body)
	}
	if v, _ := value(mfs, "netctl_nic_up", nicB); v != 1 {
		t.Errorf("A killed: B's netctl_nic_up = %v, want 1", v)
	}
	t.Logf("A killed: reason %q", labelValue(mfs, "netctl_source_missing_info", withLabel(nicA, "source", "qmp"), "reason"))
	if !ex.alive() {
		t.Fatalf("the exporter died:\n%s", ex.stderr.String())
	}
	if code, h := httpGet(t, ex.url+"/healthz"); code != 200 || h != "ok\n" {
		t.Errorf("/healthz after the kill: %d %q", code, h)
	}
}

func withLabel(m map[string]string, k, v string) map[string]string {
	n := map[string]string{k: v}
	for a, b := range m {
		n[a] = b
	}
	return n
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
	if _, mfs := ex.scrape(t); mfs["netctl_scrape_nics"] == nil {
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
	body, mfs := ex.scrape(t)
	promtoolCheck(t, body)
	nic := map[string]string{"vm": "expc", "nic": "nic0"}
	if v, ok := value(mfs, "netctl_nic_up", nic); !ok || v != 1 {
		t.Errorf("netctl_nic_up%v = %v (%v), want 1\n%s", nic, v, ok, body)
	}
	if dev := labelValue(mfs, "netctl_link_receive_packets_total", nic, "device"); dev != "expctap" {
		t.Errorf("the NIC's link is %q, want expctap (QEMU's own tap)\n%s", dev, body)
	}
	if v, ok := value(mfs, "netctl_target_up", map[string]string{"target": "vm:expc"}); !ok || v != 1 {
		t.Errorf("netctl_target_up{target=vm:expc} = %v (%v)", v, ok)
	}
	if v, ok := value(mfs, "netctl_target_up", map[string]string{"target": "vm:nctl-no-such-vm"}); !ok || v != 0 {
		t.Errorf("netctl_target_up{target=vm:nctl-no-such-vm} = %v (%v), want 0", v, ok)
	}
	why := labelValue(mfs, "netctl_target_error_info", map[string]string{"target": "vm:nctl-no-such-vm"}, "reason")
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
	body, mfs = ex.scrape(t)
	promtoolCheck(t, body)
	if v, ok := value(mfs, "netctl_nic_up", nic); !ok || v != 1 {
		t.Errorf("expc's monitor held: netctl_nic_up%v = %v (%v), want 1 (its link still counts)\n%s", nic, v, ok, body)
	}
	if _, ok := value(mfs, "netctl_link_receive_packets_total", nic); !ok {
		t.Errorf("expc's monitor held: its link counters went (they need no QMP)\n%s", body)
	}
	if v, ok := value(mfs, "netctl_source_up", withLabel(nic, "source", "qmp")); !ok || v != 0 {
		t.Errorf("expc's monitor held: netctl_source_up{source=qmp} = %v (%v), want 0", v, ok)
	}
	if why := labelValue(mfs, "netctl_source_missing_info", withLabel(nic, "source", "qmp"), "reason"); !strings.Contains(why, "busy") {
		t.Errorf("expc's monitor held: the qmp reason %q does not say busy", why)
	}
	if v, ok := value(mfs, "netctl_target_up", map[string]string{"target": "vm:expc"}); !ok || v != 0 {
		t.Errorf("expc's monitor held: netctl_target_up{target=vm:expc} = %v (%v), want 0", v, ok)
	}
	t.Logf("expc's monitor held: target %q", labelValue(mfs, "netctl_target_error_info", map[string]string{"target": "vm:expc"}, "reason"))
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
	body, mfs := ex.scrape(t)
	promtoolCheck(t, body)
	nic := map[string]string{"vm": "exphung", "nic": "nic0"}
	if v, ok := value(mfs, "netctl_nic_up", nic); !ok || v != 1 {
		t.Errorf("the answering VM's netctl_nic_up%v = %v (%v), want 1\n%s", nic, v, ok, body)
	}
	if _, ok := value(mfs, "netctl_link_receive_packets_total", nic); !ok {
		t.Errorf("the answering VM's NIC has no link counters\n%s", body)
	}
	if v, ok := value(mfs, "netctl_target_up", map[string]string{"target": "qmp:" + hung}); !ok || v != 0 {
		t.Errorf("netctl_target_up{target=qmp:%s} = %v (%v), want 0", hung, v, ok)
	}
	t.Logf("the hung VM: %q", labelValue(mfs, "netctl_target_error_info", map[string]string{"target": "qmp:" + hung}, "reason"))
}
