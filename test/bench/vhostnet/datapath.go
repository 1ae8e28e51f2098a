package main

import (
	"net"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/test/bench/ringrun"
	"github.com/netctl/netctl/vhostnet"
	"github.com/netctl/netctl/vhostnet/guest"
	"github.com/netctl/netctl/virtio"
)

// path is one vhost-net queue pair over a tap, with the driver as guest
// and a packet socket on the tap as the host side.
type path struct {
	b       macvtap.Backend
	cleanup []func()
	ifindex int
	sock    int
	mem     *guest.Memory
	rx, tx  *guest.Queue
	nic     *vhostnet.NIC
	// What the host side's packet socket saw in the last txRun: TCP
	// frames and their payload bytes (payload/frames shows whether the
	// 64 KiB frames arrived whole or segmented).
	seenFrames, seenPayload uint64
}

func newPath(name string, features virtio.Features, offload uint32, rxc, txc guest.QueueConfig) *path {
	tap, err := macvtap.CreateTap(macvtap.TapConfig{Name: name, VnetHdr: true, VnetHdrSize: 12})
	if err != nil {
		fatal("%v", err)
	}
	if err := tap.SetOffloads(macvtap.Offloads(offload)); err != nil {
		fatal("%v", err)
	}
	os.WriteFile("/proc/sys/net/ipv6/conf/"+name+"/disable_ipv6", []byte("1"), 0)
	if err := macvtap.LinkUp(name); err != nil {
		fatal("%v", err)
	}
	return attachPath(tap, name, features, rxc, txc)
}

// attachPath runs a vhost-net queue pair over backend b, with the driver's
// rings in fresh guest memory and a packet socket on observe (where the
// host sees b's traffic).
func attachPath(b macvtap.Backend, observe string, features virtio.Features, rxc, txc guest.QueueConfig) *path {
	p := &path{b: b}
	ifi, err := net.InterfaceByName(observe)
	if err != nil {
		fatal("%v", err)
	}
	p.ifindex = ifi.Index
	if p.sock, err = ringrun.OpenSink(p.ifindex); err != nil {
		fatal("%v", err)
	}
	p.mem, err = guest.NewMemory(256 << 20)
	if err != nil {
		fatal("%v", err)
	}
	if p.rx, err = guest.NewQueue(p.mem, rxc); err != nil {
		fatal("%v", err)
	}
	if p.tx, err = guest.NewQueue(p.mem, txc); err != nil {
		fatal("%v", err)
	}
	p.nic, err = vhostnet.NewNIC(vhostnet.NICConfig{Features: features, Queues: []vhostnet.QueuePair{vhostnet.NewQueuePair(p.rx, p.tx, b.QueueFD(0))},
		Memory: []vhostnet.MemoryRegion{{Size: uint64(len(p.mem.Buf)), UserAddr: p.mem.VA(0)}}})
	if err != nil {
		fatal("%v", err)
	}
	return p
}

func (p *path) close() {
	p.nic.Close()
	p.rx.Close()
	p.tx.Close()
	p.mem.Close()
	unix.Close(p.sock)
	p.b.Close()
	for _, f := range p.cleanup {
		f()
	}
}

// txRun sends frame (with its virtio-net header) from the guest for d and
// returns the TCP payload bit rate the host's packet socket received, in
// Mbit/s, and the frames the driver made available (ringrun.TX).
func (p *path) txRun(frame []byte, d time.Duration) (float64, uint64) {
	r, err := ringrun.TX(p.tx, p.sock, frame, d)
	if err != nil {
		fatal("%v", err)
	}
	p.seenFrames, p.seenPayload = r.Frames, r.Payload
	return r.Mbps, r.Sent
}

// benchTX: guest to host TCP frames, 64 KiB with TSO (GSO_TCPV4) against
// 1500-byte frames (MTU-sized, no GSO). Seed: kvm tools' TSO/UFO patch,
// guest to host 342 -> 619 Mbit/s (1.81x).
func benchTX() {
	p := newPath("bntx0", virtio.Version1|virtio.EventIdx, 0,
		guest.QueueConfig{}, guest.QueueConfig{Num: 256, BufSize: 65536 + 64, EventIdx: true})
	defer p.close()
	tso := ringrun.TCPFrame(65535-40, true)
	mtu := ringrun.TCPFrame(1500-40, false)
	var tsoSent, mtuSent uint64
	var cpuA, cpuB []float64 // ms of busy CPU per MB received, per round
	a, b := interleave(
		func() float64 {
			c := cpuBusy()
			v, n := p.txRun(tso, *duration)
			cpuA = append(cpuA, cpuPerMB(cpuBusy()-c, v))
			tsoSent += n
			return v
		},
		func() float64 {
			c := cpuBusy()
			v, n := p.txRun(mtu, *duration)
			cpuB = append(cpuB, cpuPerMB(cpuBusy()-c, v))
			mtuSent += n
			return v
		})
	sa, sb := side("tso_64k", a, 1, 1), side("mtu_1500", b, 1, 1)
	emit(Line{Bench: "vhostnet_tx_tso64k_vs_mtu1500", Unit: "Mbit/s TCP payload received by a host packet socket",
		A: sa, B: sb, Anchor: f(1.81), Goal: "ratio above the seed's 1.81", Meets: t(sa.Value/sb.Value > 1.81),
		Details: map[string]any{"frames_sent_tso": tsoSent, "frames_sent_mtu": mtuSent,
			"cpu_ms_per_MB": map[string]Side{"tso": side("tso_64k", cpuA, 1, 2), "mtu": side("mtu_1500", cpuB, 1, 2)}}})
	memcpyFraction(a)
}

// hostSent counts the frames the host's sender got into the kernel
// (ringrun.RXConfig.HostSent).
var hostSent atomic.Uint64

var rxBuf = 4096

// rxRun has the host send 64 KiB TCP frames for d while the guest receives
// them into bufSize buffers, mergeable or not (ringrun.RX); it returns the
// payload rate the guest received in Mbit/s.
func (p *path) rxRun(mergeable bool, bufSize int, d time.Duration) float64 {
	v, err := ringrun.RX(p.rx, p.ifindex, ringrun.RXConfig{Mergeable: mergeable, BufSize: bufSize, HostSent: &hostSent}, d)
	if err != nil {
		fatal("%v", err)
	}
	return v
}

// benchRX: host to guest, GUEST_TSO4 + MRG_RXBUF (tap takes TSO4, the
// guest gets 64 KiB frames in 4 KiB buffers) against no offload (the host
// kernel segments and checksums in software, the guest gets 1500-byte
// frames). Same host sender on both sides. Seed: kvm tools, host to guest
// 1060 -> 1760 Mbit/s (1.66x).
func benchRX() {
	off := newPath("bnrx0", virtio.Version1|virtio.NetMrgRxbuf|virtio.EventIdx, linux.TUN_F_CSUM|linux.TUN_F_TSO4,
		guest.QueueConfig{Num: 256, BufSize: rxBuf, EventIdx: true}, guest.QueueConfig{})
	defer off.close()
	plain := newPath("bnrx1", virtio.Version1|virtio.EventIdx, 0,
		guest.QueueConfig{Num: 256, BufSize: 2048, EventIdx: true}, guest.QueueConfig{})
	defer plain.close()
	var sentA, sentB uint64
	var cpuA, cpuB []float64 // ms of busy CPU per MB received, per round
	a, b := interleave(
		func() float64 {
			hostSent.Store(0)
			c := cpuBusy()
			v := off.rxRun(true, rxBuf, *duration)
			cpuA = append(cpuA, cpuPerMB(cpuBusy()-c, v))
			sentA += hostSent.Load()
			return v
		},
		func() float64 {
			hostSent.Store(0)
			c := cpuBusy()
			v := plain.rxRun(false, 2048, *duration)
			cpuB = append(cpuB, cpuPerMB(cpuBusy()-c, v))
			sentB += hostSent.Load()
			return v
		})
	sa, sb := side("guest_tso4_mrg_rxbuf", a, 1, 1), side("no_offload", b, 1, 1)
	emit(Line{Bench: "vhostnet_rx_tso4_mrgrxbuf_vs_no_offload", Unit: "Mbit/s TCP payload received by the guest driver",
		A: sa, B: sb, Anchor: f(1.66), Goal: "ratio above the seed's 1.66", Meets: t(sa.Value/sb.Value > 1.66),
		Details: map[string]any{"host_sends_64k_offload": sentA, "host_sends_64k_no_offload": sentB,
			"cpu_ms_per_MB": map[string]Side{"offload": side("guest_tso4_mrg_rxbuf", cpuA, 1, 2), "no_offload": side("no_offload", cpuB, 1, 2)}}})
}

// cpuPerMB is the busy CPU time (ticks of 10 ms, from cpuBusy) per MB of
// a round that ran for -d at mbps Mbit/s, in ms (schema 1 gave one figure
// over all rounds, under the names cpu_ms_per_MB_<side>).
func cpuPerMB(ticks, mbps float64) float64 {
	mb := mbps * duration.Seconds() / 8
	if mb == 0 {
		return 0
	}
	return ticks * 10 / mb
}

// memcpyFraction compares the data path's TX rounds with Go's copy() of
// 64 KiB blocks in the same VM, the same number of rounds (the medians;
// schema 1 took the best copy round).
func memcpyFraction(path []float64) {
	src := make([]byte, 16<<20)
	dst := make([]byte, 16<<20)
	for i := range src {
		src[i] = byte(i)
	}
	var rs []float64
	for r := 0; r < *rounds; r++ {
		var n uint64
		t0 := time.Now()
		for time.Since(t0) < *duration/2 {
			for off := 0; off < len(src); off += 64 << 10 {
				copy(dst[off:off+64<<10], src[off:off+64<<10])
				n += 64 << 10
			}
		}
		rs = append(rs, float64(n)*8/1e6/time.Since(t0).Seconds())
	}
	a, b := side("tx_tso_64k_delivered", path, 1, 1), side("memcpy_64k_blocks", rs, 1, 1)
	l := Line{Bench: "vhostnet_datapath_vs_memcpy", Unit: "Mbit/s", A: a, B: b,
		Goal:    "report: the fraction of memory bandwidth the data path reaches",
		Details: map[string]any{"note": "the copy rounds run after the TX rounds, not interleaved with them"}, Unpaired: true}
	emit(l)
}

// sendFor keeps the TX ring full of frame for d (ringrun.Send) and returns
// how many frames it made available.
func (p *path) sendFor(frame []byte, d time.Duration) uint64 {
	sent, err := ringrun.Send(p.tx, frame, d)
	if err != nil {
		fatal("%v", err)
	}
	return sent
}
