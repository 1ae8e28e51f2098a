// Command migrate-bench measures issue 22's benchmark for make bench
// (BENCH=migrate), in the 6.12 test VM: one Linux L2 guest (nested KVM,
// 256 MiB) migrates from QEMU to QEMU over a unix socket, 2×rounds times,
// its NIC on the destination alternately netctl's (netctl migrate
// incoming: a netctl vhost-net NIC re-created before migrate-incoming) and
// QEMU's own (-netdev tap,vhost=on added over QMP, QEMU opening the tap
// and /dev/vhost-net itself). Per migration: QEMU's downtime (query-migrate
// on the source) and the blackout seen by traffic: L1 pings the guest
// every 10 ms through a bridge both sides' taps join, and the pings lost
// across the migration, times 10 ms, are the time from the source's stop
// to the first packet through the destination's NIC. Goal: netctl's NIC
// at most 1.1× QEMU's own on both. Nothing here is asserted: the figures
// are recorded, one schema-2 JSON line each (test/bench/result).
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/netctl/netctl/attach"
	"github.com/netctl/netctl/migrate"
	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/test/bench/result"
	"github.com/netctl/netctl/test/l2"
)

var (
	commit   = flag.String("commit", "", "commit being measured")
	hostLoad = flag.String("host-load", "", "the host's /proc/loadavg when make bench started")
	vmlinuz  = flag.String("vmlinuz", "", "the kernel the nested guest boots")
	rounds   = flag.Int("rounds", 5, "migrations per side (at least 5)")
)

const mac = "52:54:00:22:00:09"

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "migrate-bench:", err)
		os.Exit(1)
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), 14*time.Minute)
	defer cancel()
	if err := l2.LoadKVM(); err != nil {
		return err
	}
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "mbbr0"}}
	if err := netlink.LinkAdd(br); err != nil {
		return err
	}
	defer netlink.LinkDel(br)
	addr, _ := netlink.ParseAddr("10.77.0.1/24")
	if err := netlink.AddrAdd(br, addr); err != nil {
		return err
	}
	if err := netlink.LinkSetUp(br); err != nil {
		return err
	}
	stateDir, err := os.MkdirTemp("", "migrate-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(stateDir)
	boot := func(i int, incoming bool) (*l2.Guest, error) {
		cfg := l2.Config{Vmlinuz: *vmlinuz, Accel: "kvm", Name: fmt.Sprintf("mb%d", i), IP: mac + "@10.77.0.2/24"}
		if incoming {
			cfg.Incoming = "defer"
		}
		return l2.Start(ctx, cfg)
	}
	cur, err := boot(0, false)
	if err != nil {
		return err
	}
	for !strings.Contains(cur.Console(), "L2-INIT") {
		if ctx.Err() != nil {
			return fmt.Errorf("the guest did not boot:\n%s", cur.Console())
		}
		time.Sleep(200 * time.Millisecond)
	}
	nic, err := attach.Attach(ctx, attach.Request{QMP: cur.QMP, ID: "net1", Backend: "vhost-net", MAC: mac, Addr: "0x5", StateDir: stateDir})
	if err != nil {
		return err
	}
	if err := enslave(nic.Tap.Name, br); err != nil {
		return err
	}
	if _, err := cur.WaitNICs(ctx, 1, 3*time.Minute); err != nil {
		return err
	}
	manifest := &migrate.Manifest{Schema: migrate.Schema, NICs: []migrate.NIC{{ID: "net1", MAC: mac, Queues: 1, Profile: "throughput", Addr: "0x5"}}}
	var down, black [2][]float64 // [0] netctl, [1] QEMU's own
	for i := 0; i < 2*(*rounds); i++ {
		side := i % 2
		dst, err := boot(i+1, true)
		if err != nil {
			return err
		}
		if side == 0 {
			nics, err := migrate.Incoming(ctx, migrate.IncomingRequest{QMP: dst.QMP, Manifest: manifest, StateDir: stateDir})
			if err != nil {
				return err
			}
			if err := enslave(nics[0].Tap.Name, br); err != nil {
				return err
			}
		} else if err := ownNIC(ctx, dst, i, br); err != nil {
			return err
		}
		var out syncBuf
		ping := exec.Command("/bin/busybox", "ping", "-i", "0.01", "10.77.0.2")
		ping.Stdout, ping.Stderr = &out, &out
		if err := ping.Start(); err != nil {
			return err
		}
		time.Sleep(500 * time.Millisecond)
		d, err := migrateUnix(ctx, cur, dst)
		if err != nil {
			ping.Process.Kill()
			return fmt.Errorf("migration %d: %w\ndestination: %s", i+1, err, dst.Stderr())
		}
		// Until the pings come back, then a little more.
		last := lastSeq(out.String())
		for end := time.Now().Add(60 * time.Second); lastSeq(out.String()) <= last+20 && time.Now().Before(end); {
			time.Sleep(10 * time.Millisecond)
		}
		ping.Process.Signal(syscall.SIGINT)
		ping.Wait()
		sent, got := summary(out.String())
		if got == 0 || lastSeq(out.String()) <= last {
			return fmt.Errorf("migration %d: no ping answered after it (%d of %d lost); destination stderr:\n%s\nconsole tail:\n%s", i+1, sent-got, sent, dst.Stderr(), tail(dst.Console(), 3000))
		}
		down[side] = append(down[side], float64(d))
		black[side] = append(black[side], float64(sent-got)*10)
		fmt.Fprintf(os.Stderr, "migrate-bench: migration %d (%s): downtime %d ms, %d of %d pings lost\n", i+1, []string{"netctl", "qemu"}[side], d, sent-got, sent)
		quit(ctx, cur)
		cur.Close()
		if _, err := attach.GC(ctx, attach.GCRequest{StateDir: stateDir}); err != nil {
			return err
		}
		cur = dst
	}
	cur.Close()
	note := "the guest's NIC on the destination: netctl migrate incoming (a netctl vhost-net NIC) vs QEMU's own -netdev tap,vhost=on over QMP; one L2 guest (nested KVM, 256 MiB), unix socket"
	for _, l := range []result.Line{
		{Bench: "migrate_downtime_netctl_vs_qemu", Unit: "ms of downtime (query-migrate on the source)",
			A: result.NewSide("netctl_nic", down[0], 1, 1), B: result.NewSide("qemu_tap_vhost", down[1], 1, 1), Goal: "netctl at most 1.1x", Unpaired: false,
			Details: map[string]string{"note": note}},
		{Bench: "migrate_blackout_netctl_vs_qemu", Unit: "ms without a ping answered across the migration (pings lost x 10 ms)",
			A: result.NewSide("netctl_nic", black[0], 1, 1), B: result.NewSide("qemu_tap_vhost", black[1], 1, 1), Goal: "netctl at most 1.1x",
			Details: map[string]string{"note": note}},
	} {
		l = result.Finish(l, *commit, *hostLoad)
		l.Meets = result.T(l.Ratio <= 1.1)
		result.Print(l)
	}
	return nil
}

func enslave(name string, br netlink.Link) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return err
	}
	if err := netlink.LinkSetMaster(l, br); err != nil {
		return err
	}
	return netlink.LinkSetUp(l)
}

// ownNIC gives dst the NIC as QEMU makes it itself: tap,vhost=on.
func ownNIC(ctx context.Context, dst *l2.Guest, i int, br netlink.Link) error {
	c, err := qmp.Dial(ctx, dst.QMP)
	if err != nil {
		return err
	}
	defer c.Close()
	tap := fmt.Sprintf("mbown%d", i)
	if err := c.Run(ctx, "netdev_add", map[string]any{"type": "tap", "id": "own1", "ifname": tap, "script": "no", "downscript": "no", "vhost": true}, nil); err != nil {
		return err
	}
	if err := c.Run(ctx, "device_add", map[string]any{"driver": "virtio-net-pci", "id": "net1", "netdev": "own1", "mac": mac, "addr": "0x5"}, nil); err != nil {
		return err
	}
	return enslave(tap, br)
}

// migrateUnix migrates src into dst and returns QEMU's downtime (ms).
func migrateUnix(ctx context.Context, src, dst *l2.Guest) (int64, error) {
	uri := "unix:" + l2.Run + "/mb.sock"
	dc, err := qmp.Dial(ctx, dst.QMP)
	if err != nil {
		return 0, err
	}
	err = dc.Run(ctx, "migrate-incoming", map[string]string{"uri": uri}, nil)
	dc.Close()
	if err != nil {
		return 0, err
	}
	sc, err := qmp.Dial(ctx, src.QMP)
	if err != nil {
		return 0, err
	}
	defer sc.Close()
	if err := sc.Run(ctx, "migrate", map[string]string{"uri": uri}, nil); err != nil {
		return 0, err
	}
	var mig struct {
		Status    string `json:"status"`
		Downtime  int64  `json:"downtime"`
		ErrorDesc string `json:"error-desc"`
	}
	for end := time.Now().Add(4 * time.Minute); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if err := sc.Run(ctx, "query-migrate", nil, &mig); err != nil {
			return 0, err
		}
		switch mig.Status {
		case "completed":
			return mig.Downtime, nil
		case "failed", "cancelled":
			return 0, fmt.Errorf("migration %s: %s", mig.Status, mig.ErrorDesc)
		}
	}
	return 0, fmt.Errorf("migration did not end: %s", mig.Status)
}

func quit(ctx context.Context, g *l2.Guest) {
	if c, err := qmp.Dial(ctx, g.QMP); err == nil {
		c.Run(ctx, "quit", nil, nil)
		c.Close()
	}
}

var seqRe = regexp.MustCompile(`seq=(\d+)`)

func lastSeq(s string) int {
	last := -1
	for _, m := range seqRe.FindAllStringSubmatch(s, -1) {
		if n, _ := strconv.Atoi(m[1]); n > last {
			last = n
		}
	}
	return last
}

func summary(s string) (sent, got int) {
	m := regexp.MustCompile(`(\d+) packets transmitted, (\d+) packets received`).FindStringSubmatch(s)
	if m == nil {
		return 0, 0
	}
	sent, _ = strconv.Atoi(m[1])
	got, _ = strconv.Atoi(m[2])
	return sent, got
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
