package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vishvananda/netlink"

	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/vhostnet/guest"
	"github.com/netctl/netctl/virtio"
)

func veth(name string) func() {
	attrs := netlink.NewLinkAttrs()
	attrs.Name = name
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: name + "p"}); err != nil {
		fatal("veth %s: %v", name, err)
	}
	for _, n := range []string{name, name + "p"} {
		os.WriteFile("/proc/sys/net/ipv6/conf/"+n+"/disable_ipv6", []byte("1"), 0)
		if err := macvtap.LinkUp(n); err != nil {
			fatal("%v", err)
		}
	}
	return func() {
		if l, err := netlink.LinkByName(name); err == nil {
			netlink.LinkDel(l)
		}
	}
}

var txFeatures = virtio.Version1 | virtio.EventIdx

func txQueue() guest.QueueConfig {
	return guest.QueueConfig{Num: 256, BufSize: 65536 + 64, EventIdx: true}
}

// backendPath builds a TX path over one backend kind; the host side
// watches the tap, or the peer of the veth the macvtap or packet socket
// sits on.
func backendPath(kind macvtap.Kind) *path {
	switch kind {
	case macvtap.KindTap:
		return newPath("bbtap0", txFeatures, 0, guest.QueueConfig{}, txQueue())
	case macvtap.KindMacvtap:
		del := veth("bbmv")
		mv, err := macvtap.CreateMacvtap(macvtap.MacvtapConfig{Name: "bbmv0", Lower: "bbmv", MAC: guest.GuestMAC, VnetHdrSize: 12})
		if err != nil {
			fatal("%v", err)
		}
		p := attachPath(mv, "bbmvp", txFeatures, guest.QueueConfig{}, txQueue())
		p.cleanup = append(p.cleanup, del)
		return p
	default:
		del := veth("bbpk")
		ps, err := macvtap.OpenPacketSocket(macvtap.PacketConfig{Interface: "bbpk", VnetHdrSize: 12})
		if err != nil {
			fatal("%v", err)
		}
		p := attachPath(ps, "bbpkp", txFeatures, guest.QueueConfig{}, txQueue())
		p.cleanup = append(p.cleanup, del)
		return p
	}
}

// benchBackends: the same TSO TX run (64 KiB GSO_TCPV4 frames from the
// driver) on tap, macvtap and packet socket, reported side by side.
func benchBackends() {
	frame := tcpFrame(65535-40, true)
	res := map[macvtap.Kind][]float64{}
	for r := 0; r < *rounds; r++ {
		for _, k := range []macvtap.Kind{macvtap.KindTap, macvtap.KindMacvtap, macvtap.KindPacket} {
			p := backendPath(k)
			v, _ := p.txRun(frame, *duration)
			p.close()
			res[k] = append(res[k], v)
		}
	}
	tap, mv, pk := median(res[macvtap.KindTap]), median(res[macvtap.KindMacvtap]), median(res[macvtap.KindPacket])
	emit(Line{Bench: "backends_tso_tx_tap_macvtap_packet", Unit: "Mbit/s TCP payload received on the host side",
		A: Side{Name: "tap", Value: round(tap, 1)}, B: Side{Name: "macvtap_on_veth", Value: round(mv, 1)},
		Goal: "report side by side",
		Details: map[string]any{"packet_socket_on_veth": round(pk, 1), "ratio_packet_vs_tap": round(pk/tap, 3),
			"note": "macvtap and packet socket sit on a veth whose peer is watched; the veth segments the 64 KiB frames (46 frames each), the tap path delivers them whole"}})
}

// reloadVhostNet reloads vhost_net with experimental_zcopytx set.
func reloadVhostNet(zcopy bool) {
	v := "0"
	if zcopy {
		v = "1"
	}
	if out, err := exec.Command("rmmod", "vhost_net").CombinedOutput(); err != nil {
		fatal("rmmod vhost_net: %v: %s", err, out)
	}
	if out, err := exec.Command("insmod", "/mods/vhost_net.ko", "experimental_zcopytx="+v).CombinedOutput(); err != nil {
		fatal("insmod vhost_net: %v: %s", err, out)
	}
	b, _ := os.ReadFile("/sys/module/vhost_net/parameters/experimental_zcopytx")
	if strings.TrimSpace(string(b)) != v {
		fatal("experimental_zcopytx is %q after reload, want %s", b, v)
	}
}

// benchZeroCopy: TX through a tap with vhost_net's zero-copy TX on against
// off (the module reloaded between rounds), with 64 KiB TSO frames and
// with 256-byte frames (the smallest vhost sends without copying). Seed:
// the mp-device zero-copy patch, 1.1 -> 1.7 Gbit/s (1.55x).
func benchZeroCopy() {
	big, small := tcpFrame(65535-40, true), tcpFrame(256-54, false)
	run := func(zc bool, frame []byte) float64 {
		reloadVhostNet(zc)
		p := newPath("bnzc0", txFeatures, 0, guest.QueueConfig{}, txQueue())
		v := p.txRunCounted("bnzc0", frame, *duration)
		p.close()
		return v
	}
	for _, c := range []struct {
		name  string
		frame []byte
	}{{"64k_tso", big}, {"256b", small}} {
		a, b := interleave(func() float64 { return run(true, c.frame) }, func() float64 { return run(false, c.frame) })
		emit(Line{Bench: "zerocopy_tx_on_vs_off_" + c.name, Unit: "Mbit/s of frames the tap took from vhost-net (rx_bytes; nothing copies them further)",
			A: Side{Name: "zcopytx_on", Value: round(a, 1)}, B: Side{Name: "zcopytx_off", Value: round(b, 1)},
			Anchor: f(1.55), Goal: "ratio above the seed's 1.55", Meets: t(a/b > 1.55)})
	}
	reloadVhostNet(false)
}

// txRunCounted sends frame from the guest for d and returns the rate the
// tap's rx_bytes counter grew, in Mbit/s: what vhost-net pushed into the
// kernel, with no reader copying it again (the frames end at the IP layer,
// as on a wire).
func (p *path) txRunCounted(dev string, frame []byte, d time.Duration) float64 {
	counter := func() uint64 {
		b, _ := os.ReadFile("/sys/class/net/" + dev + "/statistics/rx_bytes")
		var v uint64
		fmt.Sscan(strings.TrimSpace(string(b)), &v)
		return v
	}
	unix.Close(p.sock) // no host-side reader in this measurement
	p.sock = -1
	start, t0 := counter(), time.Now()
	p.sendFor(frame, d)
	end, el := counter(), time.Since(t0)
	for deadline := time.Now().Add(time.Second); p.tx.Pending() > 0 && time.Now().Before(deadline); {
		p.tx.Poll()
		time.Sleep(time.Millisecond)
	}
	return float64(end-start) * 8 / 1e6 / el.Seconds()
}
