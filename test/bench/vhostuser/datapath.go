package main

import (
	"context"
	"encoding/binary"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/test/bench/gsosend"
	"github.com/netctl/netctl/test/bench/result"
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

func (p *path) hostSide() {
	var err error
	p.sock, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		fatal("%v", err)
	}
	if err := unix.Bind(p.sock, &unix.SockaddrLinklayer{Protocol: linux.Htons(unix.ETH_P_ALL), Ifindex: p.ifindex}); err != nil {
		fatal("%v", err)
	}
	unix.SetsockoptInt(p.sock, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1)
	unix.SetsockoptInt(p.sock, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 64<<20)
	tv := unix.NsecToTimeval(int64(20 * time.Millisecond))
	unix.SetsockoptTimeval(p.sock, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
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

func tcpFrame(payload int, gso bool) []byte {
	fr := guest.IPv4Frame(guest.ProtoTCP, guest.GuestIP, guest.HostIP, 40000, 5201, guest.Pattern(payload, 1), true)
	h := guest.NetHdr{Flags: linux.VIRTIO_NET_HDR_F_NEEDS_CSUM, CsumStart: 34, CsumOffset: 16}
	if gso {
		h.GSOType, h.HdrLen, h.GSOSize = linux.VIRTIO_NET_HDR_GSO_TCPV4, 54, 1448
	}
	return append(h.Append(nil, 12), fr...)
}

// txRun keeps the TX ring full of frame (prefilled, as a guest's frames
// already are in its memory) for d, and returns the TCP payload rate the
// host's packet socket received, in Mbit/s.
func (p *path) txRun(frame []byte, d time.Duration) float64 {
	var payload atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 128<<10)
		for {
			n, _, err := unix.Recvfrom(p.sock, buf, 0)
			if err != nil {
				select {
				case <-stop:
					return
				default:
					continue
				}
			}
			if n > 54 && binary.BigEndian.Uint16(buf[12:]) == 0x0800 && buf[23] == guest.ProtoTCP {
				payload.Add(uint64(n - 54))
			}
		}
	}()
	if err := p.tx.Prefill(frame); err != nil {
		fatal("%v", err)
	}
	t0 := time.Now()
	for time.Since(t0) < d {
		for {
			if _, ok, err := p.tx.Poll(); err != nil {
				fatal("tx: %v", err)
			} else if !ok {
				break
			}
		}
		pushed := false
		for p.tx.Free() > 0 && p.tx.PushOutInPlace() == nil {
			pushed = true
		}
		p.tx.Kick1()
		if !pushed {
			p.tx.WaitInterrupt(time.Millisecond)
		}
	}
	elapsed := time.Since(t0)
	got := payload.Load()
	close(stop)
	wg.Wait()
	for deadline := time.Now().Add(2 * time.Second); p.tx.Pending() > 0 && time.Now().Before(deadline); {
		if _, ok, _ := p.tx.Poll(); !ok {
			time.Sleep(time.Millisecond)
		}
	}
	return float64(got) * 8 / 1e6 / elapsed.Seconds()
}

// rxRun has the host send 64 KiB TCP frames (GSO, through a
// PACKET_VNET_HDR socket) for d while the driver receives them into 4 KiB
// mergeable buffers, reading only the header; it returns the payload rate
// in Mbit/s.
func (p *path) rxRun(d time.Duration) float64 {
	stop, err := gsosend.Start(p.ifindex, nil)
	if err != nil {
		fatal("%v", err)
	}
	var bytes uint64
	fill := func() {
		for p.rx.Free() > 0 && p.rx.PushIn(rxCfg.BufSize) == nil {
		}
		p.rx.Kick1()
	}
	fill()
	t0 := time.Now()
	for time.Since(t0) < d {
		got := false
		for p.rx.DeviceUsedIdx() != p.rx.LastUsed() {
			_, n, err := p.rx.RecvMergeableLen(time.Second)
			if err != nil {
				fatal("rx: %v", err)
			}
			if n > 54 {
				bytes += uint64(n - 54)
			}
			got = true
		}
		fill()
		if !got {
			p.rx.WaitInterrupt(time.Millisecond)
		}
	}
	elapsed := time.Since(t0)
	stop()
	for deadline := time.Now().Add(200 * time.Millisecond); time.Now().Before(deadline); {
		if _, ok, _ := p.rx.Poll(); !ok {
			time.Sleep(time.Millisecond)
		}
	}
	return float64(bytes) * 8 / 1e6 / elapsed.Seconds()
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
			func(p *path) float64 { return p.txRun(tcpFrame(1500-40, false), *duration) }},
		{"vhostuser_tx_tso64k_bridge_vs_direct", "Mbit/s TCP payload (64 KiB TSO frames) guest to host, received by a host packet socket",
			func(p *path) float64 { return p.txRun(tcpFrame(65535-40, true), *duration) }},
		{"vhostuser_rx_gso64k_bridge_vs_direct", "Mbit/s TCP payload (64 KiB GSO frames into 4 KiB mergeable buffers) host to guest",
			func(p *path) float64 { return p.rxRun(*duration) }},
	} {
		a, b := interleave(func() float64 { return c.run(br) }, func() float64 { return c.run(di) })
		sa, sb := result.NewSide("bridge", a, 1, 1), result.NewSide("direct_vhost_net", b, 1, 1)
		emit(result.Line{Bench: c.bench, Unit: c.unit, A: sa, B: sb, Goal: "ratio at least 0.95",
			Meets: result.T(sb.Value > 0 && sa.Value/sb.Value >= 0.95), Details: map[string]any{"note": note}})
	}
}
