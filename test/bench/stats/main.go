// Command stats-bench measures issue 14's benchmarks for make bench
// (BENCH=stats) and prints one schema-2 JSON line each
// (test/bench/result):
//
//   - scrape: the cost of one scrape of netctl exporter (GET /metrics, as
//     Prometheus does it, until the whole answer is read) with 1, 16 and
//     64 NICs, per NIC: it must grow at worst linearly (per-NIC cost at
//     64 NICs at most that at 1). The NICs are real: netctl attached them
//     (attach.Attach, QEMU's userspace path over a tap it created) to
//     paused QEMUs (-S, no guest): one QEMU with 1 NIC, one with 16, four
//     with 16 each. Each scenario is its own state directory and exporter.
//     Each scrape lists the state, dials each VM's monitor, asks each NIC's
//     virtio status and reads its tap's counters; with no guest driver
//     the rings are not read (the status says the driver has not started),
//     so a guest's ring reads (two process_vm_readv per queue) are not in
//     these figures.
//   - watch: the CPU time netctl stats --watch --interval 1s uses over
//     -watch-secs (10 s) with 16 NICs and with 1 (utime+stime of the
//     process, from its rusage), in percent of one CPU; -watch-rounds (5)
//     runs of each, interleaved 16, 1, 16, 1, ...; the figure is their
//     median.
//   - watchguest: the same for one NIC of a running guest (test/guest: QEMU
//     7.2, TCG, the 6.12 kernel) that pings the host 100 times a second
//     through it, so that the rings are read (every 100 ms between the
//     samples too), against one NIC of a paused QEMU, interleaved the
//     same way.
//
// Scrapes run interleaved round by round (1, 16, 64, rotating which goes
// first); each figure is the median of its rounds. It runs as root, in a
// network namespace of its own (made at start), so its taps stay there.
// Nothing here is a test: the figures are recorded, not asserted.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/attach"
	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/test/bench/result"
	"github.com/netctl/netctl/test/guest"
	"github.com/netctl/netctl/test/prom"
)

var (
	netctlBin = flag.String("netctl", "", "the netctl binary")
	commit    = flag.String("commit", "", "commit being measured")
	hostLoad  = flag.String("host-load", "", "the host's /proc/loadavg when make bench started")
	rounds    = flag.Int("rounds", 15, "interleaved scrape rounds per scenario (at least 5)")
	watchSecs = flag.Int("watch-secs", 10, "seconds one run of netctl stats --watch lasts")
	watchRnds = flag.Int("watch-rounds", 5, "interleaved netctl stats --watch runs per side (at least 5)")
	only      = flag.String("only", "scrape,watch,watchguest", "comma-separated: scrape, watch, watchguest")
)

func init() {
	// Every child (QEMU, netctl) is started from the main goroutine,
	// locked to the main thread, which main moves into a new network
	// namespace: the children inherit it.
	runtime.LockOSThread()
}

func fatal(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "stats-bench: "+format+"\n", a...)
	os.Exit(1)
}

func main() {
	flag.Parse()
	if *netctlBin == "" {
		fatal("-netctl BIN is required")
	}
	if *rounds < 5 || *rounds > 1000 || *watchSecs < 5 || *watchSecs > 600 || *watchRnds < result.MinRounds || *watchRnds > 100 {
		fatal("-rounds %d (5 to 1000), -watch-secs %d (5 to 600), -watch-rounds %d (5 to 100): every figure is the median of at least 5 rounds",
			*rounds, *watchSecs, *watchRnds)
	}
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		fatal("a network namespace of its own (unshare): %v (run as root)", err)
	}
	if err := macvtap.LinkUp("lo"); err != nil {
		fatal("%v", err)
	}
	ns, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		fatal("%v", err)
	}
	dir, err := os.MkdirTemp("", "stats-bench")
	if err != nil {
		fatal("%v", err)
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	r := &rig{dir: dir, client: nsClient(ns)}
	defer r.close()
	if err := r.setup(ctx); err != nil {
		r.close()
		fatal("%v", err)
	}
	for _, b := range strings.Split(*only, ",") {
		switch b {
		case "scrape":
			err = r.benchScrape(ctx)
		case "watch":
			err = r.benchWatch(ctx)
		case "watchguest":
			err = r.benchWatchGuest(ctx)
		default:
			err = fmt.Errorf("-only %s: the benchmarks are scrape, watch and watchguest", b)
		}
		if err != nil {
			r.close()
			fatal("%s: %v", b, err)
		}
	}
}

// scenario is one state directory with n NICs and its exporter.
type scenario struct {
	n        int
	stateDir string
	url      string
	exporter *exec.Cmd
}

type rig struct {
	dir       string
	client    *http.Client
	qemus     []*exec.Cmd
	scenarios []*scenario
}

func (r *rig) close() {
	for _, s := range r.scenarios {
		if s.exporter != nil && s.exporter.ProcessState == nil {
			s.exporter.Process.Signal(os.Interrupt)
			s.exporter.Wait()
		}
	}
	for _, q := range r.qemus {
		if q.ProcessState == nil {
			q.Process.Kill()
			q.Wait()
		}
	}
	r.qemus, r.scenarios = nil, nil
}

// startQEMU starts a paused pc QEMU without a guest, named name, with one
// QMP monitor, and waits until it answers.
func (r *rig) startQEMU(ctx context.Context, name string) (string, error) {
	sock := filepath.Join(r.dir, name+".qmp")
	cmd := exec.Command("qemu-system-x86_64", "-nodefaults", "-no-user-config", "-display", "none", "-S",
		"-name", name, "-machine", "pc", "-accel", "tcg", "-m", "128", "-qmp", "unix:"+sock+",server=on,wait=off")
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("start QEMU %s: %w", name, err)
	}
	r.qemus = append(r.qemus, cmd)
	for deadline := time.Now().Add(30 * time.Second); ; {
		c, err := qmp.Dial(ctx, sock)
		if err == nil {
			c.Close()
			return sock, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("QEMU %s: its monitor did not answer: %w", name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// setup: the QEMUs, the NICs (16 per QEMU at most: a pc machine has
// about 29 free slots) and one exporter per scenario.
func (r *rig) setup(ctx context.Context) error {
	port := 9461
	for _, n := range []int{1, 16, 64} {
		s := &scenario{n: n, stateDir: filepath.Join(r.dir, fmt.Sprintf("state%d", n))}
		r.scenarios = append(r.scenarios, s)
		for q := 0; q*16 < n; q++ {
			name := fmt.Sprintf("sb%d-%d", n, q)
			sock, err := r.startQEMU(ctx, name)
			if err != nil {
				return err
			}
			for i := 0; i < min(16, n-q*16); i++ {
				if _, err := attach.Attach(ctx, attach.Request{QMP: sock, VMName: name, ID: fmt.Sprintf("n%d", i),
					Backend: "userspace", MAC: fmt.Sprintf("52:54:00:%02x:%02x:%02x", n, q, i), StateDir: s.stateDir}); err != nil {
					return fmt.Errorf("attach n%d to %s: %w", i, name, err)
				}
			}
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		port++
		s.url = "http://" + addr + "/metrics"
		s.exporter = exec.Command(*netctlBin, "exporter", "--listen", addr, "--scrape-timeout", "60s")
		s.exporter.Env = append(os.Environ(), "NETCTL_RUN_DIR="+s.stateDir)
		s.exporter.Stderr = os.Stderr
		if err := s.exporter.Start(); err != nil {
			return err
		}
		for deadline := time.Now().Add(30 * time.Second); ; {
			resp, err := r.client.Get("http://" + addr + "/healthz")
			if err == nil {
				resp.Body.Close()
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("exporter for %d NICs: %w", n, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

var upRe = regexp.MustCompile(`(?m)^netctl_nic_up\{[^}]*\} 1$`)

// scrape is one GET /metrics read to the end; it checks every NIC is
// there and up.
func (r *rig) scrape(s *scenario) (time.Duration, error) {
	t0 := time.Now()
	resp, err := r.client.Get(s.url)
	if err != nil {
		return 0, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	d := time.Since(t0)
	if err != nil || resp.StatusCode != 200 {
		return 0, fmt.Errorf("scrape %d NICs: %d %v", s.n, resp.StatusCode, err)
	}
	if up := len(upRe.FindAll(b, -1)); up != s.n {
		return 0, fmt.Errorf("scrape %d NICs: %d are up:\n%s", s.n, up, b)
	}
	return d, nil
}

func (r *rig) benchScrape(ctx context.Context) error {
	for _, s := range r.scenarios { // warm: the first scrape resolves what later ones reuse
		for range 2 {
			if _, err := r.scrape(s); err != nil {
				return err
			}
		}
	}
	ms := map[int][]float64{}
	for i := 0; i < *rounds; i++ {
		for j := range r.scenarios {
			s := r.scenarios[(i+j)%len(r.scenarios)]
			d, err := r.scrape(s)
			if err != nil {
				return err
			}
			ms[s.n] = append(ms[s.n], d.Seconds()*1000)
		}
	}
	perNIC := func(n int) []float64 {
		var v []float64
		for _, x := range ms[n] {
			v = append(v, x/float64(n))
		}
		return v
	}
	details := map[string]any{
		"scrape_ms_median": map[string]float64{
			"1": result.Round(result.Median(ms[1]), 2), "16": result.Round(result.Median(ms[16]), 2), "64": result.Round(result.Median(ms[64]), 2)},
		"what": "GET /metrics of netctl exporter, read to the end; NICs netctl attached to paused QEMUs (16 per QEMU; no guest driver, so no ring reads)",
	}
	for _, n := range []int{64, 16} {
		l := result.Line{Bench: fmt.Sprintf("stats: one exporter scrape, per NIC, %d NICs vs 1", n), Unit: "ms per NIC",
			A: result.NewSide(fmt.Sprintf("%d NICs", n), perNIC(n), 1, 3), B: result.NewSide("1 NIC", perNIC(1), 1, 3),
			Goal: "<= 1.0 (grows at worst linearly)", Details: details}
		l = result.Finish(l, *commit, *hostLoad)
		l.Meets = result.T(l.Ratio <= 1.0)
		result.Print(l)
	}
	return nil
}

// watchCPU runs netctl stats --watch --interval 1s on s's NICs for
// -watch-secs and returns its CPU use in percent of one CPU.
func (r *rig) watchCPU(ctx context.Context, s *scenario) (float64, error) {
	cmd := exec.Command(*netctlBin, "stats", "--watch", "--interval", "1s")
	cmd.Env = append(os.Environ(), "NETCTL_RUN_DIR="+s.stateDir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	lines := make(chan int, 1)
	go func() {
		b, _ := io.ReadAll(out)
		lines <- strings.Count(string(b), "per second over")
	}()
	t0 := time.Now()
	time.Sleep(time.Duration(*watchSecs) * time.Second)
	cmd.Process.Signal(os.Interrupt)
	tables := <-lines
	if err := cmd.Wait(); err != nil {
		return 0, fmt.Errorf("netctl stats --watch (%d NICs): %v: %s", s.n, err, stderr.String())
	}
	wall := time.Since(t0)
	if tables < *watchSecs-3 {
		return 0, fmt.Errorf("netctl stats --watch (%d NICs) printed %d tables in %s", s.n, tables, wall)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return 100 * cpu.Seconds() / wall.Seconds(), nil
}

func (r *rig) benchWatch(ctx context.Context) error {
	var a, b []float64
	for range *watchRnds {
		for _, n := range []int{16, 1} {
			var s *scenario
			for _, sc := range r.scenarios {
				if sc.n == n {
					s = sc
				}
			}
			v, err := r.watchCPU(ctx, s)
			if err != nil {
				return err
			}
			if n == 16 {
				a = append(a, v)
			} else {
				b = append(b, v)
			}
		}
	}
	l := result.Line{Bench: fmt.Sprintf("stats: netctl stats --watch --interval 1s CPU over %d s, 16 NICs vs 1", *watchSecs), Unit: "% of one CPU",
		A: result.NewSide("16 NICs", a, 1, 2), B: result.NewSide("1 NIC", b, 1, 2), Goal: "report",
		Details: map[string]any{"what": "utime+stime of netctl stats --watch (table to a pipe) over its wall time; NICs on paused QEMUs (no ring reads)"}}
	result.Print(result.Finish(l, *commit, *hostLoad))
	return nil
}

// benchWatchGuest: netctl stats --watch's CPU with one NIC of a running
// guest carrying a ping flood (the rings are read) against one NIC of a
// paused QEMU (they are not).
func (r *rig) benchWatchGuest(ctx context.Context) error {
	g, err := guest.Boot(ctx, guest.Options{})
	if err != nil {
		return err
	}
	defer g.Close()
	s := &scenario{n: 1, stateDir: filepath.Join(r.dir, "stateguest")}
	nic, err := attach.Attach(ctx, attach.Request{QMP: g.QMP(), ID: "w0", Backend: "userspace", MAC: "52:54:00:97:00:02", StateDir: s.stateDir})
	if err != nil {
		return err
	}
	ifname, err := g.WaitNIC(ctx, net.HardwareAddr{0x52, 0x54, 0, 0x97, 0, 2})
	if err != nil {
		return err
	}
	l, err := netlink.LinkByName(nic.Tap.Name)
	if err != nil {
		return err
	}
	a, _ := netlink.ParseAddr("10.97.0.1/24")
	if err := netlink.AddrAdd(l, a); err != nil {
		return err
	}
	if err := netlink.LinkSetUp(l); err != nil {
		return err
	}
	if err := g.SetAddr(ctx, ifname, "10.97.0.2/24"); err != nil {
		return err
	}
	if _, err := g.Ping(ctx, "10.97.0.1", 1); err != nil {
		return err
	}
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	go g.Exec(pctx, fmt.Sprintf("ping -q -c %d -i 0.01 10.97.0.1", 100*(2*(*watchRnds)*(*watchSecs+2)+10)))
	time.Sleep(time.Second)
	var one *scenario
	for _, sc := range r.scenarios {
		if sc.n == 1 {
			one = sc
		}
	}
	var busy, idle []float64
	for range *watchRnds {
		v, err := r.watchCPU(ctx, s)
		if err != nil {
			return err
		}
		busy = append(busy, v)
		if v, err = r.watchCPU(ctx, one); err != nil {
			return err
		}
		idle = append(idle, v)
	}
	l2 := result.Line{Bench: fmt.Sprintf("stats: netctl stats --watch --interval 1s CPU over %d s, 1 NIC of a guest pinging at 100/s vs 1 NIC of a paused QEMU", *watchSecs),
		Unit: "% of one CPU", A: result.NewSide("guest NIC, rings read", busy, 1, 2), B: result.NewSide("paused QEMU NIC", idle, 1, 2),
		Goal: "report", Details: map[string]any{"what": "utime+stime of netctl stats --watch (table to a pipe) over its wall time; the guest: QEMU 7.2 TCG, 6.12, userspace virtio-net"}}
	result.Print(result.Finish(l2, *commit, *hostLoad))
	return nil
}

// nsClient is an HTTP client whose connections are made in ns.
func nsClient(ns *os.File) *http.Client {
	return &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{DialContext: prom.DialIn(ns)}}
}
