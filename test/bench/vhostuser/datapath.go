package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/test/bench/result"
	"github.com/netctl/netctl/test/bench/ringrun"
	"github.com/netctl/netctl/test/vufront"
	"github.com/netctl/netctl/vhostnet"
	"github.com/netctl/netctl/vhostnet/guest"
	"github.com/netctl/netctl/vhostuser"
	"github.com/netctl/netctl/virtio"
)

// path is one queue pair driven by the userspace driver over a tap, with a
// packet socket on the tap as the host side: either through the bridge or
// straight on vhost-net.
type path struct {
	rx, tx  *guest.Queue
	ifindex int
	sock    int
	undo    []func()
}

// Both sides' rings: EVENT_IDX, 4 KiB mergeable RX buffers, TX slots that
// take a whole 64 KiB frame.
var (
	rxCfg = guest.QueueConfig{Num: 256, BufSize: 4096, EventIdx: true}
	txCfg = guest.QueueConfig{Num: 256, BufSize: 65536 + 64, EventIdx: true}
)

func newTap(name string) (*macvtap.Tap, int) {
	tap, err := macvtap.CreateTap(macvtap.TapConfig{Name: name, VnetHdr: true, VnetHdrSize: 12})
	if err != nil {
		fatal("%v", err)
	}
	os.WriteFile("/proc/sys/net/ipv6/conf/"+name+"/disable_ipv6", []byte("1"), 0)
	if err := macvtap.LinkUp(name); err != nil {
		fatal("%v", err)
	}
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		fatal("%v", err)
	}
	return tap, ifi.Index
}

// hostSide opens the packet socket the TX rounds count on (ringrun.OpenSink).
func (p *path) hostSide() {
	var err error
	if p.sock, err = ringrun.OpenSink(p.ifindex); err != nil {
		fatal("%v", err)
	}
	p.undo = append(p.undo, func() { unix.Close(p.sock) })
}

// directPath: vhostnet.NewNIC over a tap, the driver's rings in fresh
// memory, the tap's offloads set as GUEST_CSUM|GUEST_TSO4 ask.
func directPath(name string) *path {
	tap, ifindex := newTap(name)
	if err := tap.SetOffloads(macvtap.OffloadCSUM | macvtap.OffloadTSO4); err != nil {
		fatal("%v", err)
	}
	p := &path{ifindex: ifindex}
	p.undo = append(p.undo, func() { tap.Close() })
	p.hostSide()
	mem, err := guest.NewMemory(64 << 20)
	if err != nil {
		fatal("%v", err)
	}
	p.undo = append(p.undo, func() { mem.Close() })
	if p.rx, err = guest.NewQueue(mem, rxCfg); err != nil {
		fatal("%v", err)
	}
	if p.tx, err = guest.NewQueue(mem, txCfg); err != nil {
		fatal("%v", err)
	}
	p.undo = append(p.undo, p.rx.Close, p.tx.Close)
	nic, err := vhostnet.NewNIC(vhostnet.NICConfig{Features: virtio.Version1 | virtio.NetMrgRxbuf | virtio.EventIdx,
		Queues: []vhostnet.QueuePair{vhostnet.NewQueuePair(p.rx, p.tx, tap.QueueFD(0))},
		Memory: []vhostnet.MemoryRegion{{Size: uint64(mem.Len()), UserAddr: mem.VA(0)}}})
	if err != nil {
		fatal("%v", err)
	}
	p.undo = append(p.undo, func() { nic.Close() })
	return p
}

// bridgePath: a vhostuser.Bridge on a tap, test/vufront's frontend
// negotiating the same ring features (and the offloads, which the bridge
// turns into the tap's).
func bridgePath(name string) *path {
	tap, ifindex := newTap(name)
	p := &path{ifindex: ifindex}
	p.undo = append(p.undo, func() { tap.Close() })
	p.hostSide()
	dir, err := os.MkdirTemp("", "vu-bench-")
	if err != nil {
		fatal("%v", err)
	}
	p.undo = append(p.undo, func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "vu.sock")
	b, err := vhostuser.NewBridge(vhostuser.Config{Socket: sock, Backend: tap, Offloads: macvtap.OffloadCSUM | macvtap.OffloadTSO4})
	if err != nil {
		fatal("%v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- b.Serve(ctx) }()
	p.undo = append(p.undo, func() { cancel(); <-served; b.Close() })
	dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer dcancel()
	f, err := vufront.Dial(dctx, sock, vufront.Config{RX: rxCfg, TX: txCfg})
	if err != nil {
		fatal("%v", err)
	}
	p.undo = append(p.undo, func() { f.Close() })
	want := virtio.Version1 | virtio.NetMrgRxbuf | virtio.EventIdx | virtio.NetCsum | virtio.NetGuestCsum | virtio.NetHostTSO4 | virtio.NetGuestTSO4
	if _, err := f.Negotiate(want, want, vufront.WantProtocol); err != nil {
		fatal("%v", err)
	}
	if err := f.SetupQueues(1); err != nil {
		fatal("%v", err)
	}
	p.rx, p.tx = f.Pairs()[0].RX, f.Pairs()[0].TX
	return p
}

func (p *path) close() {
	for i := len(p.undo) - 1; i >= 0; i-- {
		p.undo[i]()
	}
}

// txRun keeps the TX ring full of frame for d and returns the TCP payload
// rate the host's packet socket received, in Mbit/s (ringrun.TX).
func (p *path) txRun(frame []byte, d time.Duration) float64 {
	r, err := ringrun.TX(p.tx, p.sock, frame, d)
	if err != nil {
		fatal("%v", err)
	}
	return r.Mbps
}

// rxRun has the host send 64 KiB TCP frames for d while the driver
// receives them into 4 KiB mergeable buffers; it returns the payload rate
// in Mbit/s (ringrun.RX).
func (p *path) rxRun(d time.Duration) float64 {
	v, err := ringrun.RX(p.rx, p.ifindex, ringrun.RXConfig{Mergeable: true, BufSize: rxCfg.BufSize}, d)
	if err != nil {
		fatal("%v", err)
	}
	return v
}

// benchDatapath: the bridge's data path against direct vhost-net.
func benchDatapath() {
	br := bridgePath("vubr0")
	defer br.close()
	di := directPath("vudi0")
	defer di.close()
	note := "the bridge (vhostuser.Bridge in the bench process) programs /dev/vhost-net from test/vufront's vhost-user messages; " +
		"direct: vhostnet.NewNIC programs it itself; the same driver, ring sizes, EVENT_IDX and tap offloads on both"
	for _, c := range []struct {
		bench, unit string
		run         func(*path) float64
	}{
		{"vhostuser_tx_mtu1500_bridge_vs_direct", "Mbit/s TCP payload (1500-byte frames) guest to host, received by a host packet socket",
			func(p *path) float64 { return p.txRun(ringrun.TCPFrame(1500-40, false), *duration) }},
		{"vhostuser_tx_tso64k_bridge_vs_direct", "Mbit/s TCP payload (64 KiB TSO frames) guest to host, received by a host packet socket",
			func(p *path) float64 { return p.txRun(ringrun.TCPFrame(65535-40, true), *duration) }},
		{"vhostuser_rx_gso64k_bridge_vs_direct", "Mbit/s TCP payload (64 KiB GSO frames into 4 KiB mergeable buffers) host to guest",
			func(p *path) float64 { return p.rxRun(*duration) }},
	} {
		a, b := interleave(func() float64 { return c.run(br) }, func() float64 { return c.run(di) })
		sa, sb := result.NewSide("bridge", a, 1, 1), result.NewSide("direct_vhost_net", b, 1, 1)
		emit(result.Line{Bench: c.bench, Unit: c.unit, A: sa, B: sb, Goal: "ratio at least 0.95",
			Meets: result.T(sb.Value > 0 && sa.Value/sb.Value >= 0.95), Details: map[string]any{"note": note}})
	}
}
