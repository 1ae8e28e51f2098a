// Package selftest sets up a vhost-net NIC on this host and passes traffic
// through it, for operators who want to see that the kernel's data path
// works here (netctl selftest).
//
// Everything happens in a private network namespace: a throwaway tap with
// N queues, one vhost-net device per queue pair, the built-in userspace
// virtio-net driver as the guest, and an AF_PACKET socket on the tap as the
// host side. Nothing touches the machine's interfaces, and the namespace,
// tap and fds are gone when Run returns.
package selftest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/vhostnet"
	"github.com/netctl/netctl/vhostnet/guest"
	"github.com/netctl/netctl/virtio"
)

// Options say how much traffic to pass.
type Options struct {
	Queues    int           // queue pairs (default 1)
	Frames    int           // frames per direction and queue (default 2000)
	FrameSize int           // Ethernet frame size (default 1514)
	Timeout   time.Duration // for the whole run (default 60s)
}

// QueueStats counts what one queue pair carried.
type QueueStats struct {
	Queue      int    `json:"queue"`
	TXSent     uint64 `json:"tx_sent"`    // frames the guest made available and vhost used
	TXPackets  uint64 `json:"tx_packets"` // guest to host, as the host's packet socket received them
	TXBytes    uint64 `json:"tx_bytes"`
	RXPackets  uint64 `json:"rx_packets"` // host to guest, as the guest received them
	RXBytes    uint64 `json:"rx_bytes"`
	Kicks      uint64 `json:"kicks"`
	Interrupts uint64 `json:"interrupts"`
}

// Report is what a run negotiated and measured.
type Report struct {
	Kernel       string          `json:"kernel"`
	Offered      virtio.Features `json:"-"`
	OfferedNames []string        `json:"vhost_features"`
	OfferedHex   string          `json:"vhost_features_hex"`
	Acked        virtio.Features `json:"-"`
	AckedNames   []string        `json:"acked_features"`
	HeaderSize   int             `json:"vnet_hdr_size"`
	Tap          string          `json:"tap"`
	TapOffloads  []string        `json:"tap_offloads"`
	Queues       []QueueStats    `json:"queues"`
	TXMbps       float64         `json:"tx_mbit_s"`
	RXMbps       float64         `json:"rx_mbit_s"`
	TXSeconds    float64         `json:"tx_seconds"`
	RXSeconds    float64         `json:"rx_seconds"`
}

// Run performs the self-test. It needs root (CAP_NET_ADMIN) and
// /dev/vhost-net; without them it returns an error that says what to do.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Queues == 0 {
		o.Queues = 1
	}
	if o.Queues < 1 || o.Queues > 16 {
		return nil, fmt.Errorf("selftest: %d queue pairs: use 1 to 16", o.Queues)
	}
	if o.Frames == 0 {
		o.Frames = 2000
	}
	if o.FrameSize == 0 {
		o.FrameSize = 1514
	}
	if o.FrameSize < 60 || o.FrameSize > 2048-12 {
		return nil, fmt.Errorf("selftest: frame size %d: use 60 to %d bytes", o.FrameSize, 2048-12)
	}
	if o.Timeout == 0 {
		o.Timeout = 60 * time.Second
	}
	// Check the device first, in this namespace, for a clear error.
	d, err := vhostnet.Open()
	if err != nil {
		return nil, err
	}
	d.Close()
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	type result struct {
		r   *Report
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// This goroutine's thread enters a new network namespace and is
		// never unlocked, so the runtime ends it (and the namespace) when
		// the goroutine returns.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			ch <- result{nil, fmt.Errorf("selftest: a private network namespace needs CAP_SYS_ADMIN (run as root): %w", err)}
			return
		}
		r, err := run(ctx, o)
		ch <- result{r, err}
	}()
	res := <-ch
	return res.r, res.err
}

func run(ctx context.Context, o Options) (*Report, error) {
	var uts unix.Utsname
	unix.Uname(&uts)
	rep := &Report{Kernel: unix.ByteSliceToString(uts.Release[:]), HeaderSize: 12}
	acked := virtio.Version1 | virtio.NetMrgRxbuf | virtio.EventIdx
	offload := uint32(linux.TUN_F_CSUM | linux.TUN_F_TSO4 | linux.TUN_F_TSO6)
	rep.TapOffloads = []string{"csum", "tso4", "tso6"}

	tap, err := macvtap.CreateTap(macvtap.TapConfig{Name: "nctlst%d", VnetHdr: true, VnetHdrSize: 12, Queues: o.Queues})
	if err != nil {
		return nil, fmt.Errorf("selftest: %w", err)
	}
	defer tap.Close()
	rep.Tap = tap.Name()
	if err := tap.SetOffloads(macvtap.Offloads(offload)); err != nil {
		return nil, fmt.Errorf("selftest: %w", err)
	}
	os.WriteFile("/proc/sys/net/ipv6/conf/"+tap.Name()+"/disable_ipv6", []byte("1"), 0)
	if err := macvtap.LinkUp("lo"); err != nil {
		return nil, fmt.Errorf("selftest: %w", err)
	}
	if err := macvtap.LinkUp(tap.Name()); err != nil {
		return nil, fmt.Errorf("selftest: %w", err)
	}
	ifi, err := net.InterfaceByName(tap.Name())
	if err != nil {
		return nil, fmt.Errorf("selftest: %w", err)
	}
	sock, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(linux.Htons(unix.ETH_P_ALL)))
	if err != nil {
		return nil, fmt.Errorf("selftest: packet socket: %w", err)
	}
	defer unix.Close(sock)
	if err := unix.Bind(sock, &unix.SockaddrLinklayer{Protocol: linux.Htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
		return nil, fmt.Errorf("selftest: bind packet socket: %w", err)
	}
	// Past rmem_max (root only), so a burst from vhost is not dropped here.
	unix.SetsockoptInt(sock, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 64<<20)
	tv := unix.NsecToTimeval(int64(50 * time.Millisecond))
	unix.SetsockoptTimeval(sock, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)

	mem, err := guest.NewMemory(16 << 20 * o.Queues)
	if err != nil {
		return nil, fmt.Errorf("selftest: %w", err)
	}
	defer mem.Close()
	cfg := vhostnet.NICConfig{Features: acked,
		Memory: []vhostnet.MemoryRegion{{GuestPhysAddr: 0, Size: uint64(len(mem.Buf)), UserAddr: mem.VA(0)}}}
	var rxq, txq []*guest.Queue
	for q := 0; q < o.Queues; q++ {
		var pair [2]*guest.Queue
		for i := range pair {
			gq, err := guest.NewQueue(mem, guest.QueueConfig{Num: 256, BufSize: 2048, EventIdx: true})
			if err != nil {
				return nil, fmt.Errorf("selftest: %w", err)
			}
			defer gq.Close()
			pair[i] = gq
		}
		rxq, txq = append(rxq, pair[0]), append(txq, pair[1])
		cfg.Queues = append(cfg.Queues, vhostnet.NewQueuePair(pair[0], pair[1], tap.QueueFD(q)))
	}
	nic, err := vhostnet.NewNIC(cfg)
	if err != nil {
		return nil, fmt.Errorf("selftest: %w", err)
	}
	defer nic.Close()
	d0, err := nic.Device(0)
	if err != nil {
		return nil, fmt.Errorf("selftest: %w", err)
	}
	rep.Offered, _ = d0.Features()
	rep.OfferedNames, rep.OfferedHex = rep.Offered.Names(), fmt.Sprintf("%#x", uint64(rep.Offered))
	rep.Acked, rep.AckedNames = acked, acked.Names()
	rep.Queues = make([]QueueStats, o.Queues)
	for q := range rep.Queues {
		rep.Queues[q].Queue = q
	}

	// Guest to host: each queue sends its own flow (UDP source port
	// 4000+queue); the host side counts by flow.
	payload := o.FrameSize - 14 - 20 - 8
	var mu sync.Mutex
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 64<<10)
		for {
			n, _, err := unix.Recvfrom(sock, buf, 0)
			if err != nil {
				select {
				case <-done:
					return
				default:
					continue
				}
			}
			if n < 42 || binary.BigEndian.Uint16(buf[12:]) != 0x0800 || buf[23] != guest.ProtoUDP || string(buf[26:30]) != string(guest.GuestIP) {
				continue
			}
			q := int(binary.BigEndian.Uint16(buf[34:])) - 4000
			if q >= 0 && q < o.Queues {
				mu.Lock()
				rep.Queues[q].TXPackets++
				rep.Queues[q].TXBytes += uint64(n)
				mu.Unlock()
			}
		}
	}()
	frames := make([][]byte, o.Queues)
	for q := range frames {
		frames[q] = guest.NetHdr{}.Append(nil, 12)
		frames[q] = append(frames[q], guest.IPv4Frame(guest.ProtoUDP, guest.GuestIP, guest.HostIP, uint16(4000+q), 5001, guest.Pattern(payload, byte(q)), false)...)
	}
	t0 := time.Now()
	sent := make([]int, o.Queues)
	for left := o.Frames * o.Queues; left > 0; {
		if ctx.Err() != nil {
			close(done)
			wg.Wait()
			return nil, fmt.Errorf("selftest: guest to host: %w after %s", ctx.Err(), time.Since(t0).Round(time.Millisecond))
		}
		progress := false
		for q, tq := range txq {
			for {
				if _, ok, err := tq.Poll(); err != nil {
					return nil, fmt.Errorf("selftest: queue %d TX: %w", q, err)
				} else if !ok {
					break
				}
			}
			for sent[q] < o.Frames && tq.Free() > 0 {
				if err := tq.PushOut(frames[q]); err != nil {
					break
				}
				sent[q]++
				rep.Queues[q].TXSent++
				left--
				progress = true
			}
			tq.Kick1()
		}
		if !progress {
			txq[0].WaitInterrupt(time.Millisecond)
		}
	}
	// Let the last frames drain to the host socket.
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
		pending := 0
		for _, tq := range txq {
			tq.Poll()
			pending += tq.Pending()
		}
		if pending == 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	rep.TXSeconds = time.Since(t0).Seconds()
	close(done)
	wg.Wait()

	// Host to guest: many flows, spread over the queues by tun's flow hash.
	for _, rq := range rxq {
		for rq.Free() > 0 {
			rq.PushIn(2048)
		}
		rq.Kick1()
	}
	hostFrames := make([][]byte, 256)
	for i := range hostFrames {
		hostFrames[i] = guest.IPv4Frame(guest.ProtoUDP, guest.HostIP, guest.GuestIP, 5001, uint16(6000+i), guest.Pattern(payload, byte(i)), false)
	}
	to := &unix.SockaddrLinklayer{Ifindex: ifi.Index, Halen: 6}
	copy(to.Addr[:], guest.GuestMAC)
	total := o.Frames * o.Queues
	t0 = time.Now()
	var received int
	recvAll := func() error {
		for q, rq := range rxq {
			for rq.DeviceUsedIdx() != rq.LastUsed() {
				_, f, err := rq.RecvMergeable(time.Second)
				if err != nil {
					return fmt.Errorf("selftest: queue %d RX: %w", q, err)
				}
				rep.Queues[q].RXPackets++
				rep.Queues[q].RXBytes += uint64(len(f))
				received++
			}
			for rq.Free() > 0 {
				rq.PushIn(2048)
			}
			rq.Kick1()
		}
		return nil
	}
	for i := 0; i < total; i++ {
		for {
			err := unix.Sendto(sock, hostFrames[i%len(hostFrames)], 0, to)
			if err == nil {
				break
			}
			if !errors.Is(err, unix.ENOBUFS) && !errors.Is(err, unix.EAGAIN) {
				return nil, fmt.Errorf("selftest: host send: %w", err)
			}
			if err := recvAll(); err != nil {
				return nil, err
			}
		}
		if i%32 == 31 {
			if err := recvAll(); err != nil {
				return nil, err
			}
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("selftest: host to guest: %w", ctx.Err())
		}
	}
	for deadline := time.Now().Add(2 * time.Second); received < total && time.Now().Before(deadline); {
		if err := recvAll(); err != nil {
			return nil, err
		}
		time.Sleep(time.Millisecond)
	}
	rep.RXSeconds = time.Since(t0).Seconds()

	var txb, rxb uint64
	for q := range rep.Queues {
		rep.Queues[q].Kicks = txq[q].Kicks + rxq[q].Kicks
		rep.Queues[q].Interrupts = txq[q].Interrupts + rxq[q].Interrupts
		txb += rep.Queues[q].TXBytes
		rxb += rep.Queues[q].RXBytes
	}
	rep.TXMbps = float64(txb) * 8 / 1e6 / rep.TXSeconds
	rep.RXMbps = float64(rxb) * 8 / 1e6 / rep.RXSeconds
	for _, s := range rep.Queues {
		if s.TXPackets == 0 || s.RXPackets == 0 {
			return rep, fmt.Errorf("selftest: queue %d carried %d packets guest to host and %d host to guest: want traffic both ways on every queue", s.Queue, s.TXPackets, s.RXPackets)
		}
	}
	return rep, nil
}
