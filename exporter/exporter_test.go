package exporter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/stats"
)

// fakeSource serves fixed targets and samples; a target whose NIC is in
// fail gets no figures and a reason, as a busy or gone VM does.
type fakeSource struct {
	mu        sync.Mutex
	targets   []stats.Target
	byTarget  map[string]error
	fail      map[string]string // nic -> why
	forgotten []string
	collects  int
	deadline  bool // Collect saw a deadline on its context
}

func (f *fakeSource) Targets(ctx context.Context) ([]stats.Target, map[string]error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]stats.Target(nil), f.targets...), f.byTarget
}

func (f *fakeSource) Collect(ctx context.Context, ts []stats.Target) []stats.NICStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.collects++
	_, f.deadline = ctx.Deadline()
	var out []stats.NICStats
	for i, t := range ts {
		if why, ok := f.fail[t.NIC]; ok {
			out = append(out, stats.NICStats{Target: t, Missing: map[string]string{"rings": why, "link": why, "qmp": why}})
			continue
		}
		n := uint64(100 * (i + 1))
		s := stats.NICStats{Target: t, Time: time.Unix(1, 0),
			Link: &stats.LinkStats{RX: stats.Counters{Packets: n, Bytes: 1500 * n}, TX: stats.Counters{Packets: n / 2, Bytes: 60 * n, Drops: 1}}}
		for p := 0; p < t.QueuePairs; p++ {
			s.Queues = append(s.Queues, stats.QueueStats{Pair: p, Direction: "rx", Offered: n + 256, Completed: n, Uncounted: uint64(p)},
				stats.QueueStats{Pair: p, Direction: "tx", Offered: n / 2, Completed: n / 2})
		}
		if t.Backend == "vhost-net" {
			for p := 0; p < t.QueuePairs; p++ {
				s.Workers = append(s.Workers, stats.WorkerStats{Pair: p, TID: 1000 + p, Comm: "vhost-1", CPUSeconds: 0.25})
			}
		} else {
			s.Missing = map[string]string{"vhost": "no vhost worker: QEMU's userspace virtio-net"}
		}
		out = append(out, s)
	}
	return out
}

func (f *fakeSource) Forget(t stats.Target) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forgotten = append(f.forgotten, t.NIC)
}

func twoNICs() *fakeSource {
	return &fakeSource{
		targets: []stats.Target{
			{VM: "web1", NIC: "net1", Netdev: "netctl-net1", QMP: "/run/web1.qmp", Backend: "vhost-net", Link: "nctl0", QueuePairs: 2},
			{VM: "db1", NIC: "net1", Netdev: "netctl-net1", QMP: "/run/db1.qmp", Backend: "userspace", Link: "nctl1", QueuePairs: 1},
		},
		byTarget: map[string]error{"state": nil},
	}
}

// TestExporterMetrics holds the metric names, types and labels to what
// docs/stats.md lists, through client_golang's testutil, and passes its
// linter (the rules promtool check metrics applies).
func TestExporterMetrics(t *testing.T) {
	e := New(twoNICs(), Options{})
	const want = `
# HELP netctl_link_receive_bytes_total Bytes the guest received (a tap's transmit counter, a macvtap's receive counter); per NIC: tun and macvtap have no per-queue counters. The link's own counters, as node_exporter's: a link made anew (a migration's destination, a re-attach) starts again at 0, a counter reset.
# TYPE netctl_link_receive_bytes_total counter
netctl_link_receive_bytes_total{backend="userspace",device="nctl1",nic="net1",vm="db1"} 300000
netctl_link_receive_bytes_total{backend="vhost-net",device="nctl0",nic="net1",vm="web1"} 150000
# HELP netctl_link_transmit_drop_total Dropped packets the guest sent (a tap's receive counter, a macvtap's transmit counter); per NIC: tun and macvtap have no per-queue counters. The link's own counters, as node_exporter's: a link made anew (a migration's destination, a re-attach) starts again at 0, a counter reset.
# TYPE netctl_link_transmit_drop_total counter
netctl_link_transmit_drop_total{backend="userspace",device="nctl1",nic="net1",vm="db1"} 1
netctl_link_transmit_drop_total{backend="vhost-net",device="nctl0",nic="net1",vm="web1"} 1
# HELP netctl_nic_up 1 if the NIC's VM answered this scrape and the NIC is there, 0 if it is gone (VM exited, NIC detached) or no source answered.
# TYPE netctl_nic_up gauge
netctl_nic_up{backend="userspace",nic="net1",vm="db1"} 1
netctl_nic_up{backend="vhost-net",nic="net1",vm="web1"} 1
# HELP netctl_source_up 1 if the source (link, rings, vhost, vdpa, qmp) gave figures for the NIC in this scrape, 0 if not; netctl_source_missing_info says why.
# TYPE netctl_source_up gauge
netctl_source_up{backend="userspace",nic="net1",source="link",vm="db1"} 1
netctl_source_up{backend="userspace",nic="net1",source="qmp",vm="db1"} 1
netctl_source_up{backend="userspace",nic="net1",source="rings",vm="db1"} 1
netctl_source_up{backend="userspace",nic="net1",source="vhost",vm="db1"} 0
netctl_source_up{backend="vhost-net",nic="net1",source="link",vm="web1"} 1
netctl_source_up{backend="vhost-net",nic="net1",source="qmp",vm="web1"} 1
netctl_source_up{backend="vhost-net",nic="net1",source="rings",vm="web1"} 1
netctl_source_up{backend="vhost-net",nic="net1",source="vhost",vm="web1"} 1
# HELP netctl_vhost_worker_cpu_seconds_total CPU time of the vhost-net worker thread of a queue pair (one per /dev/vhost-net fd): the thread's own, so a new thread (a migration's destination, a re-attach) starts again at 0, a counter reset.
# TYPE netctl_vhost_worker_cpu_seconds_total counter
netctl_vhost_worker_cpu_seconds_total{backend="vhost-net",nic="net1",queue="0",vm="web1"} 0.25
netctl_vhost_worker_cpu_seconds_total{backend="vhost-net",nic="net1",queue="1",vm="web1"} 0.25
`
	if err := testutil.CollectAndCompare(e, strings.NewReader(want), "netctl_link_receive_bytes_total", "netctl_link_transmit_drop_total",
		"netctl_nic_up", "netctl_source_up", "netctl_vhost_worker_cpu_seconds_total"); err != nil {
		t.Error(err)
	}
	const wantQ = `
# HELP netctl_queue_completed_descriptors_total Descriptor chains the device returned on a queue's ring (used-ring entries: for tx one per packet, for rx one per buffer), since netctl first read the ring. direction is the guest's. They are the VM's (by its UUID, netctl_nic_info's uuid): a QEMU on this host that takes the NIC over goes on with them, from the indices the guest carried over when it came by migration (-incoming), and counting its new rings on top when it booted the guest itself (as for a device reset); without a UUID a new QEMU process starts again at 0.
# TYPE netctl_queue_completed_descriptors_total counter
netctl_queue_completed_descriptors_total{backend="userspace",direction="rx",nic="net1",queue="0",vm="db1"} 200
netctl_queue_completed_descriptors_total{backend="userspace",direction="tx",nic="net1",queue="0",vm="db1"} 100
netctl_queue_completed_descriptors_total{backend="vhost-net",direction="rx",nic="net1",queue="0",vm="web1"} 100
netctl_queue_completed_descriptors_total{backend="vhost-net",direction="rx",nic="net1",queue="1",vm="web1"} 100
netctl_queue_completed_descriptors_total{backend="vhost-net",direction="tx",nic="net1",queue="0",vm="web1"} 50
netctl_queue_completed_descriptors_total{backend="vhost-net",direction="tx",nic="net1",queue="1",vm="web1"} 50
# HELP netctl_queue_offered_descriptors_total Descriptor chains the guest made available on a queue's ring (avail-ring entries), since netctl first read the ring. direction is the guest's (rx: the guest's receive queue). They are the VM's (by its UUID, netctl_nic_info's uuid): a QEMU on this host that takes the NIC over goes on with them, from the indices the guest carried over when it came by migration (-incoming), and counting its new rings on top when it booted the guest itself (as for a device reset); without a UUID a new QEMU process starts again at 0.
# TYPE netctl_queue_offered_descriptors_total counter
netctl_queue_offered_descriptors_total{backend="userspace",direction="rx",nic="net1",queue="0",vm="db1"} 456
netctl_queue_offered_descriptors_total{backend="userspace",direction="tx",nic="net1",queue="0",vm="db1"} 100
netctl_queue_offered_descriptors_total{backend="vhost-net",direction="rx",nic="net1",queue="0",vm="web1"} 356
netctl_queue_offered_descriptors_total{backend="vhost-net",direction="rx",nic="net1",queue="1",vm="web1"} 356
netctl_queue_offered_descriptors_total{backend="vhost-net",direction="tx",nic="net1",queue="0",vm="web1"} 50
netctl_queue_offered_descriptors_total{backend="vhost-net",direction="tx",nic="net1",queue="1",vm="web1"} 50
`
	if err := testutil.CollectAndCompare(e, strings.NewReader(wantQ), "netctl_queue_completed_descriptors_total", "netctl_queue_offered_descriptors_total"); err != nil {
		t.Error(err)
	}
	const wantU = `
# HELP netctl_queue_uncounted_steps_total Steps of a queue's ring indices netctl did not count because they could not be told from the indices going back (more than half of the 16-bit range between two reads: a loadvm or snapshot revert, a reset not seen): each may hide up to 32768 descriptors.
# TYPE netctl_queue_uncounted_steps_total counter
netctl_queue_uncounted_steps_total{backend="userspace",direction="rx",nic="net1",queue="0",vm="db1"} 0
netctl_queue_uncounted_steps_total{backend="userspace",direction="tx",nic="net1",queue="0",vm="db1"} 0
netctl_queue_uncounted_steps_total{backend="vhost-net",direction="rx",nic="net1",queue="0",vm="web1"} 0
netctl_queue_uncounted_steps_total{backend="vhost-net",direction="rx",nic="net1",queue="1",vm="web1"} 1
netctl_queue_uncounted_steps_total{backend="vhost-net",direction="tx",nic="net1",queue="0",vm="web1"} 0
netctl_queue_uncounted_steps_total{backend="vhost-net",direction="tx",nic="net1",queue="1",vm="web1"} 0
`
	if err := testutil.CollectAndCompare(e, strings.NewReader(wantU), "netctl_queue_uncounted_steps_total"); err != nil {
		t.Error(err)
	}
	problems, err := testutil.CollectAndLint(e)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// TestExporterOneNICFails: a NIC whose VM does not answer is down with
// its reasons; the other NIC keeps every metric.
func TestExporterOneNICFails(t *testing.T) {
	src := twoNICs()
	src.fail = map[string]string{}
	src.targets[1].NIC = "net2"
	src.fail["net2"] = "QMP monitor busy: another client holds /run/db1.qmp"
	e := New(src, Options{})
	const want = `
# HELP netctl_nic_up 1 if the NIC's VM answered this scrape and the NIC is there, 0 if it is gone (VM exited, NIC detached) or no source answered.
# TYPE netctl_nic_up gauge
netctl_nic_up{backend="userspace",nic="net2",vm="db1"} 0
netctl_nic_up{backend="vhost-net",nic="net1",vm="web1"} 1
# HELP netctl_source_missing_info Why a source gave nothing for the NIC in this scrape, as a code (vm_gone, nic_gone, monitor_busy, no_monitor, not_started, unconfirmed, not_supported, no_link, permission, timeout, error; netctl stats says it in words); always 1.
# TYPE netctl_source_missing_info gauge
netctl_source_missing_info{backend="userspace",nic="net2",reason="monitor_busy",source="link",vm="db1"} 1
netctl_source_missing_info{backend="userspace",nic="net2",reason="monitor_busy",source="qmp",vm="db1"} 1
netctl_source_missing_info{backend="userspace",nic="net2",reason="monitor_busy",source="rings",vm="db1"} 1
`
	if err := testutil.CollectAndCompare(e, strings.NewReader(want), "netctl_nic_up", "netctl_source_missing_info"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(e, "netctl_queue_offered_descriptors_total", "netctl_queue_completed_descriptors_total"); n != 8 {
		t.Errorf("queue descriptors: %d series, want web1's 8 (2 pairs x rx/tx x offered/completed)", n)
	}
}

// TestExporterGoneNIC: a NIC listed once and then no longer stays down
// for GoneFor, then leaves the output; the source forgets it at once.
func TestExporterGoneNIC(t *testing.T) {
	src := twoNICs()
	now := time.Unix(1000, 0)
	e := New(src, Options{GoneFor: time.Minute, Now: func() time.Time { return now }})
	testutil.CollectAndCount(e)
	src.targets = src.targets[:1]
	src.byTarget = map[string]error{"state": nil, "vm:db1": errors.New(`qemuproc: no VM named "db1": run 'netctl vm list'`)}
	now = now.Add(10 * time.Second)
	const want = `
# HELP netctl_nic_up 1 if the NIC's VM answered this scrape and the NIC is there, 0 if it is gone (VM exited, NIC detached) or no source answered.
# TYPE netctl_nic_up gauge
netctl_nic_up{backend="userspace",nic="net1",vm="db1"} 0
netctl_nic_up{backend="vhost-net",nic="net1",vm="web1"} 1
# HELP netctl_target_up 1 if the target the exporter was given (--vm NAME, --qmp SOCKET, --domain DOMAIN, or the state directory) could be listed in this scrape, 0 if not (netctl_target_error_info says why).
# TYPE netctl_target_up gauge
netctl_target_up{target="state"} 1
netctl_target_up{target="vm:db1"} 0
`
	if err := testutil.CollectAndCompare(e, strings.NewReader(want), "netctl_nic_up", "netctl_target_up"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(e, "netctl_target_error_info"); n != 1 {
		t.Errorf("netctl_target_error_info: %d series, want 1", n)
	}
	if len(src.forgotten) != 1 || src.forgotten[0] != "net1" {
		t.Errorf("once gone: forgotten %v, want db1's net1 (the sampler must not read its rings on)", src.forgotten)
	}
	now = now.Add(2 * time.Minute)
	if n := testutil.CollectAndCount(e, "netctl_nic_up"); n != 1 {
		t.Errorf("after GoneFor: %d netctl_nic_up series, want 1", n)
	}
	if len(src.forgotten) != 1 || src.forgotten[0] != "net1" {
		t.Errorf("forgotten %v, want db1's net1", src.forgotten)
	}
}

// TestExporterDuplicates: the same NIC from the state and from --vm, and
// a source that repeats a queue, give one series each (a duplicate would
// fail the whole scrape).
func TestExporterDuplicates(t *testing.T) {
	src := twoNICs()
	src.targets = append(src.targets, src.targets[0])
	e := New(src, Options{})
	if n := testutil.CollectAndCount(e, "netctl_nic_up"); n != 2 {
		t.Errorf("%d netctl_nic_up series, want 2", n)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(e)
	if _, err := reg.Gather(); err != nil {
		t.Error(err)
	}
}

func TestHandler(t *testing.T) {
	src := twoNICs()
	e := New(src, Options{ScrapeTimeout: time.Minute})
	srv := httptest.NewServer(e.Handler())
	defer srv.Close()
	get := func(path string, hdr map[string]string) (int, string) {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz", nil); code != 200 || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	code, body := get("/metrics", map[string]string{"X-Prometheus-Scrape-Timeout-Seconds": "2"})
	if code != 200 || !strings.Contains(body, `netctl_nic_up{backend="vhost-net",nic="net1",vm="web1"} 1`) {
		t.Errorf("/metrics: %d\n%s", code, body)
	}
	if !src.deadline {
		t.Error("the scrape's Collect had no deadline")
	}
	if code, _ := get("/nothing", nil); code != 404 {
		t.Errorf("/nothing: %d", code)
	}
}

func TestListenLoopbackOnly(t *testing.T) {
	ctx := context.Background()
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "192.0.2.1:9465", "nonsense", "127.0.0.1:99999"} {
		ln, err := Listen(ctx, addr, false)
		if err == nil {
			ln.Close()
			t.Errorf("Listen(%q) accepted", addr)
			continue
		}
		if !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("Listen(%q) = %v, want ErrInvalid", addr, err)
		}
		if strings.Contains(addr, ":0") && !strings.Contains(err.Error(), "--allow-remote") {
			t.Errorf("Listen(%q) = %v: does not say what to do", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "localhost:0"} {
		ln, err := Listen(ctx, addr, false)
		if err != nil {
			t.Errorf("Listen(%q) = %v", addr, err)
			continue
		}
		ln.Close()
	}
}

// TestReasonLabelCodes: reasons become their codes, whatever numbers
// they carry; anything else is "error".
func TestReasonLabelCodes(t *testing.T) {
	for why, want := range map[string]string{
		"monitor busy: held by pid 4242 (libvirtd)":                      "monitor_busy",
		"VM gone: QEMU (pid 17) has exited: not available":               "vm_gone",
		"NIC gone: QEMU has no device net1 (detached?)":                  "nic_gone",
		"no QMP monitor is known for this VM: name it with --qmp SOCKET": "no_monitor",
		stats.NoMonitorWhy:                    "no_monitor",
		stats.NoMonitorQMPWhy:                 "no_monitor",
		"not provided by this driver (vduse)": "not_supported",
		"packed ring: not counted (the guest negotiated VIRTIO_F_RING_PACKED)":          "not_supported",
		"the guest's driver has not started the device (status ACKNOWLEDGE|DRIVER)":     "not_started",
		"not counted until the monitor confirms the rings (a reset?): queue 0: ...":     "unconfirmed",
		"no host link is known for this NIC":                                            "no_link",
		"process_vm_readv of QEMU (pid 9): operation not permitted: run netctl as root": "permission",
		strings.Repeat("é", 1000):                                                       "error",
	} {
		if got := reasonLabel(why); got != want {
			t.Errorf("reasonLabel(%.60q) = %q, want %q", why, got, want)
		}
	}
}

// TestExporterInvalidUTF8: label values come from outside (a tap name
// from QEMU's fdinfo, a monitor holder's comm, QEMU's -name, an error
// from QEMU): bytes that are not UTF-8 are replaced, never a panic
// (client_golang's MustNewConstMetric panics on them), and the other
// NIC is served as usual.
func TestExporterInvalidUTF8(t *testing.T) {
	src := twoNICs()
	src.targets[1].VM = "db\xff1"
	src.targets[1].Link = "tap\xfe"
	src.fail = map[string]string{"net1": "monitor busy: held by pid 7 (evil\xc3)"}
	src.targets[0].NIC = "net0"
	src.byTarget = map[string]error{"state": nil, "vm:db\xff1": errors.New("qemuproc: no VM named \"db\xff1\"")}
	e := New(src, Options{})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(e)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var up int
	for _, mf := range mfs {
		if mf.GetName() == "netctl_nic_up" {
			up = len(mf.GetMetric())
		}
	}
	if up != 2 {
		t.Errorf("%d netctl_nic_up series, want 2", up)
	}
	srv := httptest.NewServer(e.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(b), "netctl_nic_up{backend=\"userspace\",nic=\"net1\",vm=\"db\ufffd1\"} 0") ||
		!strings.Contains(string(b), `netctl_nic_up{backend="vhost-net",nic="net0",vm="web1"} 1`) {
		t.Errorf("/metrics: %d\n%s", resp.StatusCode, b)
	}
}

// TestListenChecksWhatItListensOn: a host name is resolved once, and the
// listener is on the loopback address that was checked, not on whatever
// a second lookup answers (a DNS name may answer a loopback address to
// the check and another to the listen). The fake resolver knows a name
// the real one never resolves (.invalid, RFC 6761).
func TestListenChecksWhatItListensOn(t *testing.T) {
	defer func(f func(context.Context, string) ([]net.IPAddr, error)) { lookupIPAddr = f }(lookupIPAddr)
	lookupIPAddr = func(_ context.Context, host string) ([]net.IPAddr, error) {
		switch host {
		case "metrics.invalid":
			return []net.IPAddr{{IP: net.ParseIP("::1")}, {IP: net.ParseIP("127.0.0.1")}}, nil
		case "mixed.invalid":
			return []net.IPAddr{{IP: net.ParseIP("127.0.0.1")}, {IP: net.ParseIP("192.0.2.1")}}, nil
		}
		return nil, errors.New("no such host")
	}
	ln, err := Listen(context.Background(), "metrics.invalid:0", false)
	if err != nil {
		t.Fatalf("Listen(metrics.invalid:0) = %v", err)
	}
	defer ln.Close()
	if ip := ln.Addr().(*net.TCPAddr).IP; !ip.Equal(net.ParseIP("127.0.0.1")) {
		t.Errorf("listening on %s, want 127.0.0.1 (the checked address, IPv4 first)", ip)
	}
	if ln, err := Listen(context.Background(), "mixed.invalid:0", false); err == nil || !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "192.0.2.1") {
		if ln != nil {
			ln.Close()
		}
		t.Errorf("Listen(mixed.invalid:0) = %v, want a refusal naming 192.0.2.1", err)
	}
}

// blockingSource is fakeSource whose Collect waits for release (a hung
// monitor, without even the deadline), after saying it started.
type blockingSource struct {
	*fakeSource
	started chan struct{}
	release chan struct{}
}

func (b *blockingSource) Collect(ctx context.Context, ts []stats.Target) []stats.NICStats {
	b.started <- struct{}{}
	<-b.release
	return b.fakeSource.Collect(ctx, ts)
}

// TestScrapeWaitBounded: scrapes run one at a time, but one that waits
// for a scrape under way waits only until its own deadline (a client
// that hangs up, Prometheus's scrape timeout): it answers 503 saying
// why, instead of queueing a goroutine and a connection behind a hung
// scrape for as long as that takes.
func TestScrapeWaitBounded(t *testing.T) {
	src := &blockingSource{fakeSource: twoNICs(), started: make(chan struct{}), release: make(chan struct{})}
	e := New(src, Options{ScrapeTimeout: time.Hour})
	srv := httptest.NewServer(e.Handler())
	defer srv.Close()
	first := make(chan int, 1)
	go func() {
		resp, err := http.Get(srv.URL + "/metrics")
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	<-src.started // the first scrape holds the exporter
	waited := make(chan string, 1)
	go func() {
		req, _ := http.NewRequest("GET", srv.URL+"/metrics", nil)
		req.Header.Set("X-Prometheus-Scrape-Timeout-Seconds", "0.5")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			waited <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		waited <- fmt.Sprint(resp.StatusCode, " ", string(b))
	}()
	select {
	case got := <-waited:
		if !strings.HasPrefix(got, "503 ") || !strings.Contains(got, "another scrape was still under way") {
			t.Errorf("the second scrape: %s", got)
		}
	case <-time.After(time.Minute): // a deadlock detector, not a timing bound: the second scrape's own deadline is 0.5 s
		t.Error("the second scrape waited past its deadline for the first one")
	}
	// Through a registry (Exporter.Collect): Gather's error, not a wait.
	e2 := New(twoNICs(), Options{ScrapeTimeout: 100 * time.Millisecond})
	e2.turn <- struct{}{} // a scrape under way
	reg := prometheus.NewRegistry()
	reg.MustRegister(e2)
	if _, err := reg.Gather(); err == nil || !strings.Contains(err.Error(), "another scrape was still under way") {
		t.Errorf("Gather while another scrape holds the exporter: %v", err)
	}
	close(src.release)
	if code := <-first; code != 200 {
		t.Errorf("the first scrape: %d", code)
	}
}
