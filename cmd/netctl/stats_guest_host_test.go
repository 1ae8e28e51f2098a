package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/test/guest"
	"github.com/netctl/netctl/test/prom"
)

// TestHostStatsGuest: a real QEMU 7.2 guest (6.12 kernel, TCG, 2 vCPUs)
// on this host with two NICs netctl attached (QEMU's userspace
// virtio-net: this host has no vhost-net): net1 with 2 queue pairs, the
// guest pinging the host through it from vCPU 1, so the flow takes pair 1
// both ways (the guest's XPS sends from vCPU 1 on tx queue 1; tun's flow
// table answers on the queue the flow came from). In order, so that only
// one client uses QEMU's monitor at a time:
//   - netctl stats --json sees net1's link and pair 1's rings move, and
//     pair 0's not; the table, a row per pair, fits 80 columns;
//   - netctl stats --watch --json runs while net2 is detached: net2's rows
//     say gone and net1 keeps updating;
//   - netctl exporter, scraped by a real Prometheus server (in the test's
//     network namespace, on loopback, its config and storage in temp
//     dirs): the query rate(netctl_queue_completed_descriptors_total{queue="1",...}[10s])
//     for net1 answers non-zero and, with its window full, equals netctl
//     stats' rate within 30 %, while queue 0's stays far below; then QEMU is killed, the exporter still
//     serves and net1's netctl_nic_up is 0, in the exporter and in
//     Prometheus.
func TestHostStatsGuest(t *testing.T) {
	testenv.Host(t)
	for _, tool := range []string{"prometheus", "promtool"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s: %v: run test/host-deps.sh (Debian's prometheus package)", tool, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()
	bin := netctlBinary(t)
	t.Setenv("NETCTL_RUN_DIR", t.TempDir())
	t.Setenv("TMPDIR", t.TempDir())
	g, err := guest.Boot(ctx, guest.Options{SMP: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close() // QEMU is killed below: its error is expected
	sock := g.QMP()
	nic1 := attachJSON(t, bin, "--qmp", sock, "--id", "net1", "--mac", "52:54:00:95:00:02", "--queues", "2")
	nic2 := attachJSON(t, bin, "--qmp", sock, "--id", "net2", "--mac", "52:54:00:96:00:02")
	if0, err := g.WaitNIC(ctx, []byte{0x52, 0x54, 0, 0x95, 0, 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.WaitNIC(ctx, []byte{0x52, 0x54, 0, 0x96, 0, 2}); err != nil {
		t.Fatal(err)
	}
	guest.HostAddr(t, nic1.Tap.Name, "10.95.0.1/24")
	if err := g.SetAddr(ctx, if0, "10.95.0.2/24"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Ping(ctx, "10.95.0.1", 1); err != nil {
		t.Fatal(err)
	}
	// The guest pings the host from vCPU 1 for the rest of the test (it
	// ends with QEMU): ~50 echo requests a second out of net1's tx queue 1
	// and as many replies into its rx queue 1.
	pingDone := make(chan string, 1)
	go func() {
		out, _, _ := g.Exec(ctx, "taskset 2 ping -q -c 100000 -i 0.02 10.95.0.1")
		pingDone <- out
	}()

	// netctl stats --json: one object, two samples 2 s apart.
	var s statsSample
	for try := 0; ; try++ {
		r := execNetctl(t, bin, "stats", "--qmp", sock, "--interval", "2s", "--json")
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &s) != nil {
			t.Fatalf("netctl stats --json: %+v", r)
		}
		if n := findNIC(s, "net1"); n != nil && n.RX != nil && n.RX.Packets > 0 && len(n.Queues) == 2 && n.Queues[1].RXDescriptors != nil && *n.Queues[1].RXDescriptors > 0 {
			t.Logf("netctl stats --json: %s", strings.TrimSpace(r.stdout))
			break
		}
		if try == 2 {
			t.Fatalf("netctl stats --json: net1 shows no traffic in 3 tries: %s", r.stdout)
		}
	}
	n1 := findNIC(s, "net1")
	if s.Directions != "guest" || n1.Backend != "userspace" || n1.Link != nic1.Tap.Name || n1.TX == nil || n1.TX.Packets <= 0 {
		t.Errorf("net1: %+v", n1)
	}
	for _, d := range []struct {
		name       string
		busy, idle *float64
	}{{"rx", n1.Queues[1].RXDescriptors, n1.Queues[0].RXDescriptors}, {"tx", n1.Queues[1].TXDescriptors, n1.Queues[0].TXDescriptors}} {
		if d.busy == nil || d.idle == nil || *d.busy < 0.7*n1.RX.Packets || *d.idle > 0.1**d.busy {
			t.Errorf("net1 %s descriptors/s: pair 1 %v, pair 0 %v; want pair 1 near the link's %.1f packets/s and pair 0 quiet", d.name, d.busy, d.idle, n1.RX.Packets)
		}
	}
	if n2 := findNIC(s, "net2"); n2 == nil || n2.State != stateUp {
		t.Errorf("net2: %+v", n2)
	}
	r := execNetctl(t, bin, "stats", "--qmp", sock, "--interval", "1s")
	if r.code != 0 || !strings.Contains(r.stdout, "/net1 ") || !strings.Contains(r.stdout, "rx/tx are the guest's") ||
		!strings.Contains(r.stdout, " all ") || !strings.Contains(r.stdout, "per queue: packets and bytes have no source") {
		t.Errorf("netctl stats: %+v", r)
	}
	for _, l := range strings.Split(r.stdout, "\n") {
		if utf8.RuneCountInString(l) > tableWidth {
			t.Errorf("netctl stats: a line of %d columns: %q", utf8.RuneCountInString(l), l)
		}
	}
	t.Logf("netctl stats:\n%s", r.stdout)

	// Another client holds the monitor: --qmp cannot list (exit 1, says
	// busy and who holds it); the state's NICs are still shown from their
	// links, and the qmp source says why the rest is missing.
	hold, err := qmp.Dial(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	r = execNetctl(t, bin, "stats", "--qmp", sock, "--interval", "1s")
	if r.code != 1 || !strings.Contains(r.stderr, "in use by pid") {
		t.Errorf("netctl stats --qmp with the monitor held: %+v", r)
	}
	t.Logf("monitor held, --qmp: %s", strings.TrimSpace(r.stderr))
	r = execNetctl(t, bin, "stats", "--json", "--interval", "1s")
	var held statsSample
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &held) != nil {
		t.Fatalf("netctl stats --json (state) with the monitor held: %+v", r)
	}
	if n := findNIC(held, "net1"); n == nil || n.State != stateUp || n.RX == nil || n.RX.Packets <= 0 || !strings.Contains(n.Missing["qmp"], "busy") {
		t.Errorf("monitor held: net1 %+v", n)
	} else {
		t.Logf("monitor held: net1 rx %.1f packets/s from its link; qmp: %s", n.RX.Packets, n.Missing["qmp"])
	}
	hold.Close()

	watchDetach(t, bin, sock)
	_ = nic2

	// netctl exporter and a real Prometheus scraping it every 2 s.
	ex := startExporter(t, bin, "127.0.0.1:9465", "--scrape-timeout", "10s")
	body, mfs := ex.Scrape(t)
	prom.PromtoolCheck(t, body)
	if v, _ := prom.Value(mfs, "netctl_nic_up", map[string]string{"nic": "net1"}); v != 1 {
		t.Errorf("netctl_nic_up{nic=net1} = %v\n%s", v, body)
	}
	ps := prom.Start(t, prom.NewHTTP(t), "127.0.0.1:9465")
	q := `rate(netctl_queue_completed_descriptors_total{nic="net1",queue="1",direction="rx"}[10s])`
	v := ps.Wait(ctx, t, q, func(v float64) bool { return v > 0 })
	t.Logf("Prometheus: %s = %.2f/s (first answer)", q, v)
	// Once the 10 s window is full, Prometheus's rate is the one netctl
	// stats measured above (the ping's, ~47/s), within 30 %.
	seen := *n1.Queues[1].RXDescriptors
	full := `count_over_time(netctl_queue_completed_descriptors_total{nic="net1",queue="1",direction="rx"}[10s])`
	ps.Wait(ctx, t, full, func(v float64) bool { return v >= 5 }) // 5 scrapes in the window
	v = ps.Wait(ctx, t, q, func(float64) bool { return true })
	t.Logf("Prometheus: %s = %.2f/s (window full; netctl stats saw %.1f/s)", q, v, seen)
	if v < 0.7*seen || v > 1.3*seen {
		t.Errorf("Prometheus's rate %.2f/s is not within 30%% of the %.1f/s netctl stats measured", v, seen)
	}
	q0 := `rate(netctl_queue_completed_descriptors_total{nic="net1",queue="0",direction="rx"}[10s])`
	if v0 := ps.Wait(ctx, t, q0, func(float64) bool { return true }); v0 > 0.1*v {
		t.Errorf("Prometheus: queue 0 took %.2f/s of the flow pinned to pair 1 (%.2f/s)", v0, v)
	} else {
		t.Logf("Prometheus: %s = %.2f/s", q0, v0)
	}
	ql := `rate(netctl_link_receive_packets_total{nic="net1"}[10s])`
	t.Logf("Prometheus: %s = %.2f/s", ql, ps.Wait(ctx, t, ql, func(v float64) bool { return v > 0 }))

	// An exporter restart under a real Prometheus: no false increase().
	ex = restartUnderPrometheus(ctx, t, bin, ex, ps, nic1.Tap.Name, net.HardwareAddr{0x52, 0x54, 0, 0x95, 0, 2})

	// Kill QEMU: the exporter keeps serving; net1 is down.
	if err := syscall.Kill(nic1.QEMUPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case out := <-pingDone:
		t.Logf("the guest's ping ended with QEMU: %s", strings.TrimSpace(out))
	case <-ctx.Done():
		t.Fatal("the guest's ping did not end with QEMU")
	}
	body, mfs = ex.Scrape(t)
	prom.PromtoolCheck(t, body)
	if v, ok := prom.Value(mfs, "netctl_nic_up", map[string]string{"nic": "net1"}); !ok || v != 0 {
		t.Errorf("QEMU killed: netctl_nic_up{nic=net1} = %v (%v), want 0\n%s", v, ok, body)
	}
	if !ex.Alive() {
		t.Fatalf("the exporter died with the VM:\n%s", ex.Stderr.String())
	}
	ps.Wait(ctx, t, `netctl_nic_up{nic="net1"}`, func(v float64) bool { return v == 0 })
	t.Logf("Prometheus: netctl_nic_up{nic=\"net1\"} = 0 after the kill")
}

func findNIC(s statsSample, id string) *nicRates {
	for i := range s.NICs {
		if s.NICs[i].NIC == id {
			return &s.NICs[i]
		}
	}
	return nil
}

// watchDetach runs netctl stats --watch --json while net2 is detached:
// net2's rows turn "gone" and net1 keeps updating; SIGINT ends it with
// exit 0.
func watchDetach(t *testing.T, bin, sock string) {
	t.Helper()
	cmd := exec.Command(bin, "stats", "--watch", "--json", "--interval", "1s")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr prom.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan statsSample)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var s statsSample
			if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
				t.Errorf("watch: not JSON: %q", sc.Text())
				continue
			}
			lines <- s
		}
	}()
	next := func() statsSample {
		select {
		case s, ok := <-lines:
			if !ok {
				t.Fatalf("netctl stats --watch ended: %s", stderr.String())
			}
			return s
		case <-time.After(2 * time.Minute):
			t.Fatalf("netctl stats --watch printed nothing for 2 minutes: %s", stderr.String())
		}
		return statsSample{}
	}
	for i := 0; i < 2; i++ {
		s := next()
		if n := findNIC(s, "net2"); n == nil || n.State != stateUp {
			t.Fatalf("watch before detach: net2 %+v", n)
		}
	}
	// The monitor serves one client at a time; the watch holds it for a
	// moment each second, so a detach can find it busy: try again then.
	for try := 0; ; try++ {
		r := execNetctl(t, bin, "detach", "--qmp", sock, "--id", "net2")
		if r.code == 0 {
			break
		}
		if try == 4 || !strings.Contains(r.stderr, "busy") && !strings.Contains(r.stderr, "in use") {
			t.Fatalf("netctl detach net2 (try %d): %+v", try, r)
		}
		t.Logf("detach found the monitor busy (try %d): %s", try, strings.TrimSpace(r.stderr))
		time.Sleep(300 * time.Millisecond)
	}
	gone := 0
	for gone < 3 {
		s := next()
		n1, n2 := findNIC(s, "net1"), findNIC(s, "net2")
		if n2 == nil {
			t.Fatalf("watch after detach: net2's rows vanished: %+v", s)
		}
		if n2.State != stateGone {
			continue // sampled before the detach finished
		}
		if n1 == nil || n1.State != stateUp || n1.RX == nil || n1.RX.Packets <= 0 {
			t.Errorf("watch after detach: net1 %+v", n1)
		}
		gone++
	}
	t.Logf("watch: net2 gone, net1 updating for %d intervals", gone)
	cmd.Process.Signal(os.Interrupt)
	for range lines {
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("netctl stats --watch on SIGINT: %v: %s", err, stderr.String())
	}
}

// restartUnderPrometheus: the host sends net1's guest more than a
// 16-bit turn of frames (its RX rings' counters pass 65536, the raw
// indices wrapped), then netctl exporter is restarted while Prometheus
// scrapes it. The new exporter's ring counters start at 0, a counter
// reset Prometheus handles: increase() over a window holding the restart
// is about what the link received in it (the guest's ping replies),
// never the raw 16-bit index a counter starting there would add (up to
// 65535 descriptors that never happened).
func restartUnderPrometheus(ctx context.Context, t *testing.T, bin string, ex *prom.Exporter, ps *prom.Server, tap string, mac net.HardwareAddr) *prom.Exporter {
	t.Helper()
	rxSum := func() float64 {
		_, mfs := ex.Scrape(t)
		sum := 0.0
		for _, q := range []string{"0", "1"} {
			v, _ := prom.Value(mfs, "netctl_queue_completed_descriptors_total", map[string]string{"nic": "net1", "direction": "rx", "queue": q})
			sum += v
		}
		return sum
	}
	l, err := net.InterfaceByName(tap)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	to := &unix.SockaddrLinklayer{Protocol: 0xb588, Ifindex: l.Index, Halen: 6} // htons(0x88b5)
	copy(to.Addr[:], mac)
	frame := make([]byte, 60)
	copy(frame, mac)
	copy(frame[6:], l.HardwareAddr)
	frame[12], frame[13] = 0x88, 0xb5 // IEEE local experimental: the guest's stack drops it, its RX ring used it
	start := rxSum()
	deadline := time.Now().Add(2 * time.Minute)
	got := 0.0
	for got < 70000 && time.Now().Before(deadline) {
		for i := 0; i < 2000; i++ {
			unix.Sendto(fd, frame, 0, to) // a full tap queue drops: counted by what the rings show
		}
		time.Sleep(20 * time.Millisecond)
		if got = rxSum() - start; got >= 70000 {
			break
		}
	}
	t.Logf("flood: the guest's RX rings completed %.0f descriptors (a 16-bit turn is 65536)", got)
	if got < 65536 {
		t.Errorf("the flood reached only %.0f RX descriptors in 2 min: the indices did not wrap, the restart proves little", got)
	}
	// Prometheus scrapes the counters after the flood, and the window
	// queried below (20 s, ending 10 s after the restart) holds none of it.
	time.Sleep(15 * time.Second)
	ex.Stop(t, os.Interrupt)
	time.Sleep(time.Second)
	ex = startExporter(t, bin, "127.0.0.1:9465", "--scrape-timeout", "10s")
	time.Sleep(10 * time.Second) // five scrapes of the new exporter
	qd := `sum(increase(netctl_queue_completed_descriptors_total{nic="net1",direction="rx"}[20s]))`
	ql := `increase(netctl_link_receive_packets_total{nic="net1"}[20s])`
	d := ps.Wait(ctx, t, qd, func(float64) bool { return true })
	lk := ps.Wait(ctx, t, ql, func(float64) bool { return true })
	t.Logf("across the restart: %s = %.0f, %s = %.0f", qd, d, ql, lk)
	if lk > 5000 {
		t.Errorf("the window holds %.0f link packets: the flood is in it, the check proves nothing", lk)
	}
	if d > 1.3*lk+100 {
		t.Errorf("Prometheus's increase() of the RX descriptors across the exporter restart is %.0f while the link received %.0f: a false increase", d, lk)
	}
	return ex
}
