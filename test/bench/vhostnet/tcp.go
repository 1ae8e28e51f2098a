package main

import (
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/vhostnet"
	"github.com/netctl/netctl/vhostnet/guest"
	"github.com/netctl/netctl/virtio"
)

// The TCP rig gives the userspace driver a real network stack, so that a
// TCP stream runs between two kernel stacks with vhost-net in the middle:
//
//	netns "host":  TCP socket -- tapH --(vhost-net)-- driver rings
//	netns "guest": TCP socket -- tapG -- driver (forwards frames between its rings and tapG)
//
// tapH is the vhost-net backend. The driver forwards every frame it
// receives from vhost (host to guest) into tapG, with its virtio-net
// header, and every frame the guest stack sends out of tapG into vhost's
// TX ring. With offloads the host stack hands vhost 64 KiB GSO frames and
// the guest stack takes them whole; without, every 1500-byte segment is a
// packet on both sides, as in the seed's netperf runs.

type tcpRig struct {
	tapH, tapG *macvtap.Tap
	mem        *guest.Memory
	rx, tx     *guest.Queue
	nic        *vhostnet.NIC
	mrg        bool
	hostFD     int // connecting socket in the host netns
	listenFD   int // listening socket in the guest netns
	guestFD    int // connecting socket in the guest netns
	hostListen int // listening socket in the host netns
	guestUDP   int // UDP sender in the guest netns
	hostUDP    int // UDP receiver in the host netns, 10.99.0.2:5202
	stop       chan struct{}
	wg         sync.WaitGroup
	fwdErr     atomic.Value
}

// inNewNetns runs f on a thread that enters a new network namespace; the
// thread ends with f, the namespace lives on through the fds f opened.
func inNewNetns(f func() error) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			ch <- err
			return
		}
		ch <- f()
	}()
	return <-ch
}

func setAddr(name string, ip net.IP) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, _ := unix.NewIfreq(name)
	if err := ifr.SetInet4Addr(ip.To4()); err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFADDR, ifr); err != nil {
		return fmt.Errorf("address on %s: %w", name, err)
	}
	for _, n := range []string{"lo", name} {
		if err := macvtap.LinkUp(n); err != nil {
			return err
		}
	}
	return nil
}

var (
	tcpHostIP  = net.IPv4(10, 99, 0, 2)
	tcpGuestIP = net.IPv4(10, 99, 0, 1)
)

func newTCPRig(offload bool) *tcpRig {
	var o macvtap.Offloads
	if offload {
		o = macvtap.OffloadCSUM | macvtap.OffloadTSO4 | macvtap.OffloadTSO6
	}
	return newStackRig(o)
}

// newStackRig builds the two-stack rig with the given offloads on both
// taps; any offload brings MRG_RXBUF and 4 KiB RX buffers with it.
func newStackRig(o macvtap.Offloads) *tcpRig {
	offload := o != 0
	r := &tcpRig{mrg: offload, stop: make(chan struct{})}
	tunOff := uint32(o)
	feats := virtio.Version1 | virtio.EventIdx
	rxc := guest.QueueConfig{Num: 256, BufSize: 2048, EventIdx: true}
	if offload {
		feats |= virtio.NetMrgRxbuf
		rxc.BufSize = 4096
	}
	err := inNewNetns(func() (err error) {
		if r.tapH, err = macvtap.CreateTap(macvtap.TapConfig{Name: "tcph0", VnetHdr: true, VnetHdrSize: 12}); err != nil {
			return err
		}
		if err := r.tapH.SetOffloads(macvtap.Offloads(tunOff)); err != nil {
			return err
		}
		if err := setAddr("tcph0", tcpHostIP); err != nil {
			return err
		}
		if r.hostListen, err = listen5201([4]byte{10, 99, 0, 2}); err != nil {
			return err
		}
		if r.hostUDP, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err != nil {
			return err
		}
		unix.SetsockoptInt(r.hostUDP, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 64<<20)
		// UDP_GRO, as udpgso_bench_rx -G: a GSO datagram train is read whole.
		unix.SetsockoptInt(r.hostUDP, unix.IPPROTO_UDP, 104, 1)
		if err := unix.Bind(r.hostUDP, &unix.SockaddrInet4{Port: 5202, Addr: [4]byte{10, 99, 0, 2}}); err != nil {
			return err
		}
		r.hostFD, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		return err
	})
	if err != nil {
		fatal("tcp rig, host side: %v", err)
	}
	err = inNewNetns(func() (err error) {
		if r.tapG, err = macvtap.CreateTap(macvtap.TapConfig{Name: "tcpg0", VnetHdr: true, VnetHdrSize: 12}); err != nil {
			return err
		}
		if err := r.tapG.SetOffloads(macvtap.Offloads(tunOff)); err != nil {
			return err
		}
		if err := setAddr("tcpg0", tcpGuestIP); err != nil {
			return err
		}
		if r.listenFD, err = listen5201([4]byte{10, 99, 0, 1}); err != nil {
			return err
		}
		if r.guestUDP, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err != nil {
			return err
		}
		r.guestFD, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		return err
	})
	if err != nil {
		fatal("tcp rig, guest side: %v", err)
	}
	if r.mem, err = guest.NewMemory(64 << 20); err != nil {
		fatal("%v", err)
	}
	if r.rx, err = guest.NewQueue(r.mem, rxc); err != nil {
		fatal("%v", err)
	}
	if r.tx, err = guest.NewQueue(r.mem, guest.QueueConfig{Num: 256, BufSize: 65536 + 64, EventIdx: true}); err != nil {
		fatal("%v", err)
	}
	r.nic, err = vhostnet.NewNIC(vhostnet.NICConfig{Features: feats, Queues: []vhostnet.QueuePair{vhostnet.NewQueuePair(r.rx, r.tx, r.tapH.FD())},
		Memory: []vhostnet.MemoryRegion{{Size: uint64(len(r.mem.Buf)), UserAddr: r.mem.VA(0)}}})
	if err != nil {
		fatal("%v", err)
	}
	unix.SetNonblock(r.tapG.FD(), true)
	r.wg.Add(1)
	go r.forward()
	return r
}

func listen5201(addr [4]byte) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: 5201, Addr: addr}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, unix.Listen(fd, 1)
}

// forward moves frames between the driver's rings and tapG until stop.
func (r *tcpRig) forward() {
	defer r.wg.Done()
	rx, tx, g := r.rx, r.tx, r.tapG.FD()
	for rx.Free() > 0 {
		rx.PushIn(rx.BufSize())
	}
	rx.Kick1()
	out := make([]byte, 0, 128<<10)
	in := make([]byte, 128<<10)
	fail := func(err error) { r.fwdErr.Store(err) }
	for {
		select {
		case <-r.stop:
			return
		default:
		}
		progress := false
		// host to guest: vhost RX ring -> tapG
		for rx.DeviceUsedIdx() != rx.LastUsed() {
			var h guest.NetHdr
			var frame []byte
			if r.mrg {
				var err error
				if h, frame, err = rx.RecvMergeable(time.Second); err != nil {
					fail(err)
					return
				}
			} else {
				el, ok, err := rx.Poll()
				if err != nil || !ok {
					fail(fmt.Errorf("rx poll: %v", err))
					return
				}
				h, _ = guest.ParseNetHdr(el.Data, 12)
				frame = el.Data[12:]
			}
			h.NumBuffers = 0
			out = append(h.Append(out[:0], 12), frame...)
			unix.Write(g, out) // a full tapG queue drops, as a NIC would
			progress = true
		}
		for rx.Free() > 0 {
			rx.PushIn(rx.BufSize())
		}
		rx.Kick1()
		// guest to host: tapG -> vhost TX ring
		for tx.Free() > 0 {
			n, err := unix.Read(g, in)
			if err != nil || n <= 0 {
				break
			}
			if err := tx.PushOut(in[:n]); err != nil {
				break
			}
			progress = true
		}
		tx.Kick1()
		for {
			if _, ok, _ := tx.Poll(); !ok {
				break
			}
		}
		if !progress {
			pfd := []unix.PollFd{{Fd: int32(g), Events: unix.POLLIN}, {Fd: int32(rx.Call), Events: unix.POLLIN}}
			unix.Poll(pfd, 1)
			rx.TakeInterrupts()
		}
	}
}

// stream sends for d over a new TCP connection, host to guest (or guest to
// host with toHost), and returns the rate the receiving socket got, in
// Mbit/s. The sockets were made in their namespaces and keep them.
func (r *tcpRig) stream(d time.Duration, toHost bool) float64 {
	from, lis, dst := r.hostFD, r.listenFD, [4]byte{10, 99, 0, 1}
	if toHost {
		from, lis, dst = r.guestFD, r.hostListen, [4]byte{10, 99, 0, 2}
	}
	if err := unix.Connect(from, &unix.SockaddrInet4{Port: 5201, Addr: dst}); err != nil {
		fatal("tcp connect: %v (forwarder: %v)", err, r.fwdErr.Load())
	}
	conn, _, err := unix.Accept4(lis, unix.SOCK_CLOEXEC)
	if err != nil {
		fatal("tcp accept: %v", err)
	}
	defer unix.Close(conn)
	var got atomic.Uint64
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 256<<10)
		for {
			n, err := unix.Read(conn, buf)
			if n <= 0 || err != nil {
				return
			}
			got.Add(uint64(n))
		}
	}()
	buf := make([]byte, 64<<10)
	tv := unix.NsecToTimeval(int64(200 * time.Millisecond))
	unix.SetsockoptTimeval(from, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv)
	// warm up, then measure
	t0 := time.Now()
	for time.Since(t0) < d/5 {
		unix.Write(from, buf)
	}
	start, t1 := got.Load(), time.Now()
	for time.Since(t1) < d {
		unix.Write(from, buf)
	}
	end, el := got.Load(), time.Since(t1)
	unix.Shutdown(from, unix.SHUT_WR)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
	return float64(end-start) * 8 / 1e6 / el.Seconds()
}

func (r *tcpRig) close() {
	close(r.stop)
	r.wg.Wait()
	r.nic.Close()
	for _, fd := range []int{r.hostFD, r.listenFD, r.guestFD, r.hostListen, r.guestUDP, r.hostUDP} {
		unix.Close(fd)
	}
	r.rx.Close()
	r.tx.Close()
	r.mem.Close()
	r.tapH.Close()
	r.tapG.Close()
}

// tcpCompare runs one TCP stream per round and side (a fresh rig each, so
// the sides cannot disturb each other), interleaved, and returns each
// side's rounds.
func tcpCompare(toHost bool) (as, bs []float64) {
	for i := 0; i < *rounds; i++ {
		for _, off := range []bool{true, false} {
			r := newTCPRig(off)
			v := r.stream(*duration*2, toHost)
			if e := r.fwdErr.Load(); e != nil {
				fatal("forwarder: %v", e)
			}
			r.close()
			if off {
				as = append(as, v)
			} else {
				bs = append(bs, v)
			}
		}
	}
	return as, bs
}

const tcpSetup = "host-netns TCP socket, tap, vhost-net, netctl driver, tap, guest-netns TCP socket: the VM kernel's stack plays the guest's"

// benchRXTCP: TCP host -> guest between two kernel stacks, GUEST_TSO4/6 +
// MRG_RXBUF against no offload. Seed: kvm tools, 1060 -> 1760 Mbit/s (1.66x).
func benchRXTCP() {
	a, b := tcpCompare(false)
	sa, sb := side("guest_tso4_tso6_mrg_rxbuf", a, 1, 1), side("no_offload", b, 1, 1)
	emit(Line{Bench: "vhostnet_rx_tcp_stream_tso_mrgrxbuf_vs_no_offload", Unit: "Mbit/s TCP goodput host to guest stack",
		A: sa, B: sb, Anchor: f(1.66), Goal: "ratio above the seed's 1.66", Meets: t(sa.Value/sb.Value > 1.66),
		Details: map[string]any{"setup": tcpSetup, "rounds_offload": sa.Rounds, "rounds_no_offload": sb.Rounds}})
}

// benchTXTCP: TCP guest -> host between two kernel stacks, the guest stack
// sending TSO frames (HOST_TSO4/6) against no offload. Seed: kvm tools,
// 342 -> 619 Mbit/s (1.81x).
func benchTXTCP() {
	a, b := tcpCompare(true)
	sa, sb := side("host_tso4_tso6", a, 1, 1), side("no_offload", b, 1, 1)
	emit(Line{Bench: "vhostnet_tx_tcp_stream_tso_vs_no_offload", Unit: "Mbit/s TCP goodput guest stack to host",
		A: sa, B: sb, Anchor: f(1.81), Goal: "ratio above the seed's 1.81", Meets: t(sa.Value/sb.Value > 1.81),
		Details: map[string]any{"setup": tcpSetup, "rounds_offload": sa.Rounds, "rounds_no_offload": sb.Rounds}})
}

// udpStream has the guest stack send UDP with UDP_SEGMENT (45 datagrams of
// 1400 bytes per send, as udpgso_bench_tx does) to the host for d, and
// returns the rate the host's UDP socket received, in MB/s.
func (r *tcpRig) udpStream(d time.Duration) float64 {
	const udpSegment = 103 // UDP_SEGMENT
	if err := unix.SetsockoptInt(r.guestUDP, unix.IPPROTO_UDP, udpSegment, 1400); err != nil {
		fatal("UDP_SEGMENT: %v", err)
	}
	if err := unix.Connect(r.guestUDP, &unix.SockaddrInet4{Port: 5202, Addr: [4]byte{10, 99, 0, 2}}); err != nil {
		fatal("udp connect: %v", err)
	}
	var got atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	tv := unix.NsecToTimeval(int64(50 * time.Millisecond))
	unix.SetsockoptTimeval(r.hostUDP, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	go func() {
		defer close(done)
		buf := make([]byte, 64<<10)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if n, err := unix.Read(r.hostUDP, buf); err == nil && n > 0 {
				got.Add(uint64(n))
			}
		}
	}()
	buf := make([]byte, 45*1400)
	t0 := time.Now()
	for time.Since(t0) < d/5 {
		unix.Write(r.guestUDP, buf)
	}
	start, t1 := got.Load(), time.Now()
	for time.Since(t1) < d {
		if _, err := unix.Write(r.guestUDP, buf); err != nil {
			time.Sleep(100 * time.Microsecond)
		}
	}
	end, el := got.Load(), time.Since(t1)
	close(stop)
	<-done
	return float64(end-start) / 1e6 / el.Seconds()
}

// benchUSO: UDP guest -> host with USO (the guest stack hands 63000-byte
// UDP_L4 GSO frames through tap, driver and vhost-net) against the same
// offloads without USO (the guest kernel segments into 1400-byte datagrams
// first). Seed: tun/virtio-net USO, udpgso_bench 36 -> 120 MB/s (3.3x).
func benchUSO() {
	base := macvtap.OffloadCSUM | macvtap.OffloadTSO4 | macvtap.OffloadTSO6
	run := func(o macvtap.Offloads) float64 {
		r := newStackRig(o)
		v := r.udpStream(*duration * 2)
		if e := r.fwdErr.Load(); e != nil {
			fatal("forwarder: %v", e)
		}
		r.close()
		return v
	}
	a, b := interleave(func() float64 { return run(base | macvtap.OffloadUSO4 | macvtap.OffloadUSO6) }, func() float64 { return run(base) })
	sa, sb := side("uso", a, 1, 1), side("no_uso", b, 1, 1)
	emit(Line{Bench: "uso_udp_tx_with_vs_without", Unit: "MB/s UDP payload received by a host socket",
		A: sa, B: sb, Anchor: f(3.3), Goal: "ratio above the seed's 3.3", Meets: t(sa.Value/sb.Value > 3.3),
		Details: map[string]any{"setup": tcpSetup, "sender": "UDP_SEGMENT 1400, 45 segments per send", "receiver": "UDP_GRO, 64 KiB reads"}})
}
