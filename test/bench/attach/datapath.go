package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"time"

	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/test/bench/l2guest"
	"github.com/netctl/netctl/test/bench/result"
	"github.com/netctl/netctl/test/l2"
)

// The nested guest's two NICs: netctl's (attached on vhost-net while the
// guest is paused) and QEMU's own (-netdev tap,vhost=on).
// test/bench/l2guest/init.sh gives the guest side its address by the
// MAC's last byte.
const (
	netctlMAC   = "52:54:00:12:00:01"
	qemuMAC     = "52:54:00:12:00:02"
	netctlGuest = "10.91.0.2"
	qemuGuest   = "10.92.0.2"
	qemuTap     = "bq0"
)

// nestedKernel checks what a benchmark with nested guests (what) needs:
// netctl and the agent, the test VM's vhost-net, and a kernel for the
// guests, which it returns.
func nestedKernel(what string) (string, error) {
	if *netctlBin == "" || *agent == "" {
		return "", fmt.Errorf("-netctl and -agent are needed")
	}
	if *root == "" {
		return "", fmt.Errorf("the %s benchmark runs in the 6.12 test VM (-root /host): it needs vhost-net", what)
	}
	if _, err := os.Stat("/dev/vhost-net"); err != nil {
		return "", fmt.Errorf("the nested guests' NICs need vhost-net: %w", err)
	}
	kernel := *vmlinuz
	if kernel == "" {
		kernel = os.Getenv("NETCTL_VM_VMLINUZ")
	}
	if kernel == "" {
		return "", fmt.Errorf("-vmlinuz: which kernel the nested guests boot (netctl-vm sets NETCTL_VM_VMLINUZ)")
	}
	return kernel, nil
}

// benchDatapath boots one nested guest and measures TCP streams on it.
func benchDatapath() error {
	kernel, err := nestedKernel("data path")
	if err != nil {
		return err
	}
	ctx := context.Background()
	runDir, err := os.MkdirTemp("", "attach-bench-run")
	if err != nil {
		return err
	}
	defer os.RemoveAll(runDir)

	t0 := time.Now()
	g, err := bootNested(ctx, kernel, *agent, qemuTap)
	if err != nil {
		return err
	}
	defer g.Close()

	// netctl's NIC, into the paused guest.
	cmd := exec.Command(*netctlBin, "attach", "--qmp", g.QMP, "--id", "netnic", "--mac", netctlMAC, "--backend", "vhost-net", "--json")
	cmd.Env = append(os.Environ(), "NETCTL_RUN_DIR="+filepath.Join(runDir, "run"))
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("netctl attach: %w: %s", err, stderr.Bytes())
	}
	var nic struct {
		Backend string `json:"backend"`
		Tap     struct {
			Name string `json:"name"`
		} `json:"tap"`
		Properties map[string]string `json:"properties"`
		Features   []string          `json:"features"`
	}
	if err := json.Unmarshal(out.Bytes(), &nic); err != nil || nic.Tap.Name == "" || nic.Backend != "vhost-net" {
		return fmt.Errorf("netctl attach --json printed %.300q (want a tap on vhost-net): %v", out.Bytes(), err)
	}
	for tap, addr := range map[string]string{nic.Tap.Name: "10.91.0.1/24", qemuTap: "10.92.0.1/24"} {
		if err := l2guest.AddrUp(tap, addr); err != nil {
			return err
		}
	}
	c, err := qmp.Dial(ctx, g.QMP)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Run(ctx, "cont", nil, nil); err != nil {
		return err
	}
	attached := time.Since(t0)
	for _, ip := range []string{netctlGuest, qemuGuest} {
		if err := g.wait(ctx, 420*time.Second, func() bool { _, err := l2guest.AgentCmd(ip, "ping"); return err == nil }); err != nil {
			return fmt.Errorf("the nested guest's agent at %s: %w; console:\n%s", ip, err, l2guest.Tail(g.Console(), 2000))
		}
	}
	booted := time.Since(t0)
	logf("datapath: nested guest up in %v (netctl attach done %v after start)", booted.Round(time.Second), attached.Round(time.Second))

	details := map[string]any{
		"guest":          "nested Linux (the test VM's 6.12 kernel, busybox initramfs), QEMU " + qemuVersion(ctx, c) + " TCG -cpu max,erms=off, 1 vCPU, 512 MiB, pc",
		"boot_s":         result.Round(booted.Seconds(), 1),
		"netctl_nic":     fmt.Sprintf("netctl attach --backend vhost-net into the paused guest: tap %s, properties %v", nic.Tap.Name, nic.Properties),
		"qemu_nic":       "-netdev tap,vhost=on,ifname=" + qemuTap + " -device virtio-net-pci",
		"offloads_off":   "guest: ethtool -K off for tx-checksum-ip-generic, sg, tso, tso6, tso-ecn, gso, gro, rx-gro-hw (VIRTIO_NET_CTRL_GUEST_OFFLOADS)",
		"guest_features": guestFeatures(g.Console()),
		"stream":         fmt.Sprintf("one TCP connection per round, %.1f s; guest->host counted by the host, host->guest by the guest", *roundSecs),
	}
	for _, id := range []string{"netnic", "qemunic"} {
		st, err := l2.QueryVirtioStatus(ctx, c, id)
		if err != nil {
			return err
		}
		if !st.VhostStarted || !st.DriverOK() {
			return fmt.Errorf("%s: vhost-started %v, DRIVER_OK %v: the guest's driver is not on vhost-net", id, st.VhostStarted, st.DriverOK())
		}
		details[id+"_vhost_started"] = true
	}

	d := time.Duration(*roundSecs * float64(time.Second))
	// The guest's TCP segments sent and retransmitted during each
	// guest->host stream: a round that stalled shows here.
	retrans := map[string][]string{}
	tx := func(ip string) func() (float64, error) {
		return func() (float64, error) {
			o0, r0, err := guestTCPStats()
			if err != nil {
				return 0, err
			}
			v, err := l2guest.StreamFromGuest(ip, d)
			if err != nil {
				return 0, err
			}
			o1, r1, err := guestTCPStats()
			if err != nil {
				return 0, err
			}
			retrans[ip] = append(retrans[ip], fmt.Sprintf("%d/%d", r1-r0, o1-o0))
			return v, nil
		}
	}
	rx := func(ip string) func() (float64, error) {
		return func() (float64, error) { return l2guest.StreamToGuest(ip, d) }
	}
	runs := map[string]func() (float64, error){
		"tx_netctl": tx(netctlGuest), "tx_qemu": tx(qemuGuest), "rx_netctl": rx(netctlGuest), "rx_qemu": rx(qemuGuest),
	}
	got := map[string][]float64{}
	offloads := func(on bool) error {
		state := map[bool]string{true: "on", false: "off"}[on]
		r, err := l2guest.AgentCmd(qemuGuest, "offload "+netctlMAC+" "+state)
		if err != nil {
			return fmt.Errorf("offloads %s: %w", state, err)
		}
		details["guest_offloads_"+state] = r
		return nil
	}
	for r := 0; r < *rounds; r++ {
		seq := []string{"tx_netctl", "tx_qemu", "rx_netctl", "rx_qemu"}
		off := []string{"tx_netctl", "rx_netctl"}
		if r%2 == 1 {
			seq = []string{"rx_qemu", "rx_netctl", "tx_qemu", "tx_netctl"}
			off = []string{"rx_netctl", "tx_netctl"}
		}
		for _, s := range seq {
			v, err := runs[s]()
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", r, s, err)
			}
			got[s] = append(got[s], v)
		}
		if err := offloads(false); err != nil {
			return err
		}
		for _, s := range off {
			v, err := runs[s]()
			if err != nil {
				return fmt.Errorf("round %d, %s with offloads off: %w", r, s, err)
			}
			got[s+"_off"] = append(got[s+"_off"], v)
		}
		if err := offloads(true); err != nil {
			return err
		}
		logf("datapath: round %d: %v", r, lastOf(got))
	}
	details["guest_tx_retransmitted_per_sent_segments"] = map[string][]string{
		"netctl_nic": retrans[netctlGuest], "qemu_nic": retrans[qemuGuest]}
	// A line's goal is met when the ratio reaches the anchor (the seed's
	// figure), or 1.0 for netctl's NIC against QEMU's.
	emitStream := func(bench string, a, b Side2, anchor float64, goal string) {
		l := result.Line{Bench: bench, Unit: "Mbit/s, TCP stream", A: result.NewSide(a.name, got[a.key], 1, 1), B: result.NewSide(b.name, got[b.key], 1, 1), Goal: goal}
		l = result.Finish(l, *commit, *hostLoad)
		target := 1.0
		if anchor != 0 {
			l.Anchor, target = result.F(anchor), anchor
		}
		l.Meets = result.T(l.Ratio >= target)
		l.Details = details
		result.Print(l)
	}
	emitStream("l2_tcp_tx_guest_offloads_on_vs_off", Side2{"tx_netctl", "offloads_on"}, Side2{"tx_netctl_off", "offloads_off"}, 1.81, "ratio above the seed's 1.81")
	emitStream("l2_tcp_rx_guest_offloads_on_vs_off", Side2{"rx_netctl", "offloads_on"}, Side2{"rx_netctl_off", "offloads_off"}, 1.66, "ratio above the seed's 1.66")
	emitStream("l2_tcp_tx_netctl_vs_qemu_vhost_nic", Side2{"tx_netctl", "netctl_attached"}, Side2{"tx_qemu", "qemu_tap_vhost_on"}, 0, "ratio at least 1.0")
	emitStream("l2_tcp_rx_netctl_vs_qemu_vhost_nic", Side2{"rx_netctl", "netctl_attached"}, Side2{"rx_qemu", "qemu_tap_vhost_on"}, 0, "ratio at least 1.0")
	return nil
}

// Side2 names one side's rounds (key in the map) and its name in the line.
type Side2 struct{ key, name string }

func lastOf(got map[string][]float64) map[string]float64 {
	m := map[string]float64{}
	for k, v := range got {
		m[k] = result.Round(v[len(v)-1], 1)
	}
	return m
}

var statsReply = regexp.MustCompile(`^ok ([0-9]{1,18}) ([0-9]{1,18})$`)

// guestTCPStats asks the agent (over QEMU's NIC) for the guest's TCP
// OutSegs and RetransSegs.
func guestTCPStats() (out, retrans int64, err error) {
	line, err := l2guest.AgentCmd(qemuGuest, "tcpstats")
	if err != nil {
		return 0, 0, err
	}
	m := statsReply.FindStringSubmatch(line)
	if m == nil {
		return 0, 0, fmt.Errorf("the agent answered %.100q to tcpstats, want ok OUTSEGS RETRANSSEGS", line)
	}
	fmt.Sscan(m[1], &out)
	fmt.Sscan(m[2], &retrans)
	return out, retrans, nil
}

func qemuVersion(ctx context.Context, c *qmp.Client) string {
	var v struct {
		QEMU struct{ Major, Minor, Micro int } `json:"qemu"`
	}
	if err := c.Run(ctx, "query-version", nil, &v); err != nil {
		return "?"
	}
	return fmt.Sprintf("%d.%d.%d", v.QEMU.Major, v.QEMU.Minor, v.QEMU.Micro)
}

// nicLine is a whole line (uptime= and its newline): the console is read
// while the nested init writes it, and a cut feature word is not a NIC.
var nicLine = regexp.MustCompile(`L2-NIC (\S+) mac=(\S+) features=([01]+) uptime=\S+\r?\n`)

// guestFeatures returns each NIC's guest driver feature word (bit 0
// first) as the nested init printed it, by MAC.
func guestFeatures(console string) map[string]string {
	m := map[string]string{}
	for _, s := range nicLine.FindAllStringSubmatch(console, -1) {
		m[s[2]] = s[3]
	}
	return m
}
