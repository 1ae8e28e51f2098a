package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/test/bench/l2guest"
	"github.com/netctl/netctl/test/bench/result"
	"github.com/netctl/netctl/test/l2"
	"github.com/netctl/netctl/test/vufront"
	"github.com/netctl/netctl/vhostuser"
	"github.com/netctl/netctl/virtio"
)

// The nested guest's NICs: vhost-user to the bridge (..:01) and QEMU's own
// tap,vhost=on (..:02); test/bench/l2guest/init.sh addresses them by the
// MAC's last byte.
const (
	nestedDir   = "/run/vubench" // as QEMU, chrooted in l2.Root, sees it
	bridgeMAC   = "52:54:00:13:00:01"
	qemuMAC     = "52:54:00:13:00:02"
	bridgeGuest = "10.93.0.2"
	qemuGuest   = "10.94.0.2"
	bridgeTap   = "vnb0"
	qemuTap     = "vnq0"
)

// benchNested boots one nested Linux guest with both NICs and compares
// TCP streams over them, both ways.
func benchNested() {
	if *agent == "" {
		fatal("nested: -agent (the static l2agent binary) is needed")
	}
	kernel := *vmlinuz
	if kernel == "" {
		kernel = os.Getenv("NETCTL_VM_VMLINUZ")
	}
	if kernel == "" {
		fatal("nested: -vmlinuz: which kernel the nested guest boots (netctl-vm sets NETCTL_VM_VMLINUZ)")
	}
	ctx := context.Background()
	if err := l2.Chroot(); err != nil {
		fatal("%v", err)
	}
	dir := l2.Root + nestedDir
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fatal("%v", err)
	}
	if err := l2guest.WriteFiles(ctx, kernel, *agent, l2guest.Init(bridgeGuest+"/24", qemuGuest+"/24"), dir); err != nil {
		fatal("nested: %v", err)
	}
	// The bridge's tap and the bridge, serving before QEMU starts (QEMU
	// waits for the vhost-user handshake).
	// The send buffer QEMU gives its own taps (net/tap-linux.c: INT_MAX
	// unless sndbuf= is given); with the kernel's default (wmem_default)
	// guest-to-host streams ran at a quarter of QEMU's NIC's.
	tap, err := macvtap.CreateTap(macvtap.TapConfig{Name: bridgeTap, VnetHdr: true, VnetHdrSize: 12, SndBuf: math.MaxInt32})
	if err != nil {
		fatal("%v", err)
	}
	defer tap.Close()
	os.WriteFile("/proc/sys/net/ipv6/conf/"+bridgeTap+"/disable_ipv6", []byte("1"), 0)
	offl, err := macvtap.ProbeOffloads(macvtap.KindTap)
	if err != nil {
		fatal("%v", err)
	}
	sock := nestedDir + "/vu.sock"
	var b *vhostuser.Bridge
	var stub *vufront.Stub
	if *nestedStub {
		// Debugging: test/vufront's Stub (a minimal offer, no data path)
		// instead of the bridge, to tell QEMU's behaviour from the bridge's.
		stub, err = vufront.NewStub(l2.Root+sock, uint64(virtio.Version1|virtio.NetMrgRxbuf|virtio.EventIdx)|vhostuser.FeatureProtocolFeatures,
			vhostuser.ProtocolMQ|vhostuser.ProtocolReplyAck|vhostuser.ProtocolLogShmFD, 1)
		if err != nil {
			fatal("%v", err)
		}
	} else {
		b, err = vhostuser.NewBridge(vhostuser.Config{Socket: l2.Root + sock, Backend: tap, Offloads: offl,
			Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})),
			OnStatus: func(st vhostuser.Status) {
				if *verbose {
					logf("bridge status: connected %v features %s regions %d rings %+v err %q", st.Connected, st.Features, st.MemoryRegions, st.Rings, st.LastError)
				}
			}})
		if err != nil {
			fatal("%v", err)
		}
		bctx, cancel := context.WithCancel(ctx)
		served := make(chan error, 1)
		go func() { served <- b.Serve(bctx) }()
		defer func() { cancel(); <-served; b.Close() }()
	}
	qmpSock, serial := nestedDir+"/qmp.sock", nestedDir+"/serial.log"
	os.Remove(l2.Root + qmpSock)
	os.Remove(l2.Root + serial)
	bmac, _ := net.ParseMAC(bridgeMAC)
	args := []string{l2.QEMU, "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-accel", "tcg", "-cpu", "max,erms=off", "-m", "512", "-smp", "1",
		"-object", "memory-backend-memfd,id=mem,size=512M,share=on", "-machine", "pc,memory-backend=mem",
		"-kernel", nestedDir + "/vmlinux", "-initrd", nestedDir + "/initrd.gz",
		"-append", "console=ttyS0 quiet panic=-1 mitigations=off " + l2.BootTrims + " " + *nestedAppend,
		"-serial", "file:" + serial, "-qmp", "unix:" + qmpSock + ",server=on,wait=off",
		// No MSI-X on either NIC (INTx): QEMU 7.2 segfaults starting vhost
		// on a vhost-user NIC whose driver uses MSI-X (virtio_set_status ->
		// vhost_net_start -> msix_set_vector_notifiers, under TCG).
		"-global", "virtio-net-pci.vectors=0",
		"-netdev", "tap,id=qemunet,ifname=" + qemuTap + ",script=no,downscript=no,vhost=on",
		"-device", "virtio-net-pci,netdev=qemunet,id=qemunic,mac=" + qemuMAC}
	if *nestedVU {
		args = append(args, vufront.QEMUNIC("vunic", sock, 1, bmac)...)
	}
	if *nestedGDB {
		args = append([]string{"/usr/bin/gdb", "-batch", "-ex", "handle SIGUSR1 SIGUSR2 SIGPIPE nostop noprint", "-ex", "run", "-ex", "bt", "-ex", "info registers rip", "--args"}, args...)
	}
	t0 := time.Now()
	cmd := exec.Command("chroot", append([]string{l2.Root}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if *nestedGDB {
		cmd.Stdout = &stderr
	}
	if err := cmd.Start(); err != nil {
		fatal("nested: start QEMU: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	defer func() { cmd.Process.Kill(); <-exited }()
	console := func() string { b, _ := os.ReadFile(l2.Root + serial); return string(b) }
	waitFor := func(what string, timeout time.Duration, ok func() bool) {
		for deadline := time.Now().Add(timeout); !ok(); time.Sleep(200 * time.Millisecond) {
			if time.Now().After(deadline) {
				if stub != nil {
					log, err := stub.Log()
					for _, r := range log {
						logf("stub: %v", r)
					}
					logf("stub: %v", err)
				}
				var st []byte
				if b != nil {
					st, _ = json.Marshal(b.Status())
				}
				select {
				case <-exited:
					logf("nested: QEMU exited: %v; its output: %s", cmd.ProcessState, l2guest.Tail(stderr.String(), 6000))
				default:
					logf("nested: QEMU still runs")
				}
				fatal("nested: %s: not within %v; QEMU: %s; bridge: %s; console: %s", what, timeout, stderr.String(), st, l2guest.Tail(console(), 2000))
			}
		}
	}
	waitFor("QEMU's tap "+qemuTap, 60*time.Second, func() bool { _, err := net.InterfaceByName(qemuTap); return err == nil })
	for link, cidr := range map[string]string{bridgeTap: "10.93.0.1/24", qemuTap: "10.94.0.1/24"} {
		if err := l2guest.AddrUp(link, cidr); err != nil {
			fatal("nested: %v", err)
		}
	}
	ips := []string{bridgeGuest, qemuGuest}
	if !*nestedVU {
		ips = ips[1:]
	}
	for _, ip := range ips {
		waitFor("the agent at "+ip, *bootWait, func() bool { _, err := l2guest.AgentCmd(ip, "ping"); return err == nil })
	}
	booted := time.Since(t0)
	logf("nested: guest up in %v", booted.Round(time.Second))
	c, err := qmp.Dial(ctx, l2.Root+qmpSock)
	if err != nil {
		fatal("nested: %v", err)
	}
	defer c.Close()
	details := map[string]any{
		"guest":      "nested Linux (the test VM's kernel, busybox initramfs), QEMU 7.2 TCG -cpu max,erms=off, 1 vCPU, 512 MiB shared memfd RAM, pc",
		"boot_s":     result.Round(booted.Seconds(), 1),
		"bridge_nic": "-netdev vhost-user to a vhostuser.Bridge (in the bench process) over tap " + bridgeTap + " (sndbuf INT_MAX, as QEMU sets its own taps')",
		"qemu_nic":   "-netdev tap,vhost=on,ifname=" + qemuTap,
		"stream":     fmt.Sprintf("one TCP connection per round, %v; guest->host counted here, host->guest by the guest", *streamD),
	}
	for _, id := range []string{"vunic", "qemunic"} {
		st, err := l2.QueryVirtioStatus(ctx, c, id)
		if err != nil {
			fatal("nested: %v", err)
		}
		if !st.VhostStarted || !st.DriverOK() {
			fatal("nested: %s: vhost-started %v, DRIVER_OK %v", id, st.VhostStarted, st.DriverOK())
		}
		details[id+"_guest_features"] = st.Guest.Names()
	}
	got := map[string][]float64{}
	run := func(key string, f func() (float64, error)) {
		v, err := f()
		if err != nil {
			fatal("nested: %s: %v", key, err)
		}
		got[key] = append(got[key], v)
	}
	for r := 0; r < *rounds; r++ {
		seq := []string{"tx_bridge", "tx_qemu", "rx_bridge", "rx_qemu"}
		if r%2 == 1 {
			seq = []string{"rx_qemu", "rx_bridge", "tx_qemu", "tx_bridge"}
		}
		for _, s := range seq {
			ip := map[bool]string{true: bridgeGuest, false: qemuGuest}[strings.HasSuffix(s, "bridge")]
			if strings.HasPrefix(s, "tx") {
				run(s, func() (float64, error) { return l2guest.StreamFromGuest(ip, *streamD) })
			} else {
				run(s, func() (float64, error) { return l2guest.StreamToGuest(ip, *streamD) })
			}
		}
		logf("nested: round %d: tx %.1f/%.1f rx %.1f/%.1f Mbit/s (bridge/qemu)", r,
			got["tx_bridge"][r], got["tx_qemu"][r], got["rx_bridge"][r], got["rx_qemu"][r])
	}
	for _, d := range []struct{ dir, bench, unit string }{
		{"tx", "l2_tcp_tx_bridge_vs_qemu_vhost_net", "Mbit/s, TCP stream guest to host"},
		{"rx", "l2_tcp_rx_bridge_vs_qemu_vhost_net", "Mbit/s, TCP stream host to guest"},
	} {
		a, b := result.NewSide("vhost_user_bridge", got[d.dir+"_bridge"], 1, 1), result.NewSide("qemu_tap_vhost_on", got[d.dir+"_qemu"], 1, 1)
		emit(result.Line{Bench: d.bench, Unit: d.unit, A: a, B: b, Goal: "ratio at least 0.95",
			Meets: result.T(b.Value > 0 && a.Value/b.Value >= 0.95), Details: details})
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "vhostuser-bench: "+format+"\n", args...)
}
