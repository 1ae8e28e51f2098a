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
	"github.com/netctl/netctl/test/bench/ringrun"
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

// The backends row compares like with like: each backend hands the same
// 64 KiB TSO frames to the same kind of veth, and the host side watches
// that veth's peer. A tap has no lower device, so it reaches its veth
// through a Linux bridge (as a VM's tap usually reaches a NIC); a macvtap
// sits on its veth as its lower device, and a packet socket is bound to
// its veth. The veth then costs all three the same (the details give the
// mean TCP payload per frame the peer saw, which shows whether the 64 KiB
// frames arrived whole or segmented). The bridge is the tap's extra hop, as the macvlan driver
// is macvtap's. The old row (schema 1) compared a tap watched directly,
// whose frames arrive whole, with the other two behind a veth; that
// figure is still in the details as tap_direct, for reference only.

// bridge makes a bridge with ports enslaved and up; the returned func
// deletes it.
func bridge(name string, ports ...string) func() {
	attrs := netlink.NewLinkAttrs()
	attrs.Name = name
	br := &netlink.Bridge{LinkAttrs: attrs}
	if err := netlink.LinkAdd(br); err != nil {
		fatal("bridge %s: %v", name, err)
	}
	del := func() {
		if l, err := netlink.LinkByName(name); err == nil {
			netlink.LinkDel(l)
		}
	}
	os.WriteFile("/proc/sys/net/ipv6/conf/"+name+"/disable_ipv6", []byte("1"), 0)
	for _, p := range ports {
		l, err := netlink.LinkByName(p)
		if err == nil {
			err = netlink.LinkSetMaster(l, br)
		}
		if err != nil {
			del()
			fatal("enslave %s to %s: %v", p, name, err)
		}
	}
	if err := macvtap.LinkUp(name); err != nil {
		del()
		fatal("%v", err)
	}
	return del
}

// backendKind is one column of the backends row.
type backendKind int

const (
	tapOnVeth backendKind = iota
	macvtapOnVeth
	packetOnVeth
	tapDirect // the schema-1 tap figure, for reference
)

func (k backendKind) String() string {
	return [...]string{"tap_bridged_to_veth", "macvtap_on_veth", "packet_socket_on_veth", "tap_direct"}[k]
}

// backendPath builds a TX path over one backend kind; the host side
// watches the peer of the veth the backend reaches (or, for tapDirect,
// the tap itself).
func backendPath(kind backendKind) *path {
	switch kind {
	case tapDirect:
		return newPath("bbtap0", txFeatures, 0, guest.QueueConfig{}, txQueue())
	case tapOnVeth:
		delVeth := veth("bbtv")
		tap, err := macvtap.CreateTap(macvtap.TapConfig{Name: "bbtap1", VnetHdr: true, VnetHdrSize: 12})
		if err != nil {
			fatal("%v", err)
		}
		os.WriteFile("/proc/sys/net/ipv6/conf/bbtap1/disable_ipv6", []byte("1"), 0)
		if err := macvtap.LinkUp("bbtap1"); err != nil {
			fatal("%v", err)
		}
		delBr := bridge("bbbr0", "bbtap1", "bbtv")
		p := attachPath(tap, "bbtvp", txFeatures, guest.QueueConfig{}, txQueue())
		p.cleanup = append(p.cleanup, delBr, delVeth)
		return p
	case macvtapOnVeth:
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
// driver) on tap, macvtap and packet socket, each over a veth (see above),
// rounds interleaved across all four paths. Two lines from the same
// rounds: tap vs macvtap and tap vs packet socket.
func benchBackends() {
	frame := ringrun.TCPFrame(65535-40, true)
	kinds := []backendKind{tapOnVeth, macvtapOnVeth, packetOnVeth, tapDirect}
	res := map[backendKind][]float64{}
	seen := map[backendKind][2]uint64{} // frames, payload bytes
	for r := 0; r < *rounds; r++ {
		for _, k := range kinds {
			p := backendPath(k)
			v, _ := p.txRun(frame, *duration)
			s := seen[k]
			seen[k] = [2]uint64{s[0] + p.seenFrames, s[1] + p.seenPayload}
			p.close()
			res[k] = append(res[k], v)
		}
	}
	perFrame := map[string]float64{}
	for _, k := range kinds {
		if s := seen[k]; s[0] > 0 {
			perFrame[k.String()] = round(float64(s[1])/float64(s[0]), 0)
		}
	}
	sides := map[backendKind]Side{}
	for _, k := range kinds {
		sides[k] = side(k.String(), res[k], 1, 1)
	}
	const note = "each backend reaches a veth (the tap through a bridge, macvtap as its lower device, the packet socket bound to it) and the host side counts what the veth's peer receives"
	for _, c := range []struct {
		name         string
		other, third backendKind
	}{{"macvtap", macvtapOnVeth, packetOnVeth}, {"packet_socket", packetOnVeth, macvtapOnVeth}} {
		emit(Line{Bench: "backends_tso_tx_over_veth_tap_vs_" + c.name, Unit: "Mbit/s TCP payload received on the veth's peer",
			A: sides[tapOnVeth], B: sides[c.other], Goal: "report side by side",
			Details: map[string]any{"note": note, "third_backend": sides[c.third], "tap_direct": sides[tapDirect],
				"mean_tcp_payload_per_frame_seen": perFrame}})
	}
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
	big, small := ringrun.TCPFrame(65535-40, true), ringrun.TCPFrame(256-54, false)
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
		sa, sb := side("zcopytx_on", a, 1, 1), side("zcopytx_off", b, 1, 1)
		emit(Line{Bench: "zerocopy_tx_on_vs_off_" + c.name, Unit: "Mbit/s of frames the tap took from vhost-net (rx_bytes; nothing copies them further)",
			A: sa, B: sb, Anchor: f(1.55), Goal: "ratio above the seed's 1.55", Meets: t(sa.Value/sb.Value > 1.55)})
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
