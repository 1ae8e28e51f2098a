// Package ringrun is the data-path round of the vhost-net and vhost-user
// benches, written once for both: the userspace driver (vhostnet/guest)
// keeps a TX ring full for a round while a host packet socket counts the
// TCP payload that reaches the tap (TX), or the host floods the tap with
// 64 KiB GSO frames (test/bench/gsosend) while the driver empties its RX
// ring (RX). Whoever serves the rings (vhost-net programmed directly, or
// through the vhost-user bridge) is the caller's business; ringrun only
// drives the queues it is given and owns none of them.
package ringrun

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/test/bench/gsosend"
	"github.com/netctl/netctl/test/vhostrig/hostside"
	"github.com/netctl/netctl/vhostnet/guest"
)

// TCPFrame is a guest-to-host TCP/IPv4 frame of payload bytes behind a
// 12-byte virtio-net header that leaves the checksum to the device and,
// with gso, asks for TSO4 in 1448-byte segments.
func TCPFrame(payload int, gso bool) []byte {
	fr := guest.IPv4Frame(guest.ProtoTCP, guest.GuestIP, guest.HostIP, 40000, 5201, guest.Pattern(payload, 1), true)
	h := guest.NetHdr{Flags: linux.VIRTIO_NET_HDR_F_NEEDS_CSUM, CsumStart: 34, CsumOffset: 16}
	if gso {
		h.GSOType, h.HdrLen, h.GSOSize = linux.VIRTIO_NET_HDR_GSO_TCPV4, 54, 1448
	}
	return append(h.Append(nil, 12), fr...)
}

// OpenSink opens the host side that TX counts on: a packet socket on the
// link ifindex (hostside.Open) with a 20 ms receive timeout and a 64 MiB
// receive buffer (SO_RCVBUFFORCE: needs CAP_NET_ADMIN). The caller owns
// the fd.
func OpenSink(ifindex int) (int, error) {
	s, err := hostside.Open(ifindex, 20*time.Millisecond)
	if err != nil {
		return -1, err
	}
	if err := unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 64<<20); err != nil {
		unix.Close(s)
		return -1, fmt.Errorf("packet socket: SO_RCVBUFFORCE: %w", err)
	}
	return s, nil
}

// TXResult is what one TX round did.
type TXResult struct {
	Mbps    float64 // TCP payload the sink received within the round, Mbit/s
	Sent    uint64  // frames the driver made available
	Frames  uint64  // TCP frames the sink received within the round
	Payload uint64  // their TCP payload bytes (Payload/Frames shows whether 64 KiB frames arrived whole or segmented)
}

// TX keeps tx full of frame for d (Send) while a goroutine counts the TCP
// frames and payload that arrive on sink (OpenSink), then waits up to 2 s
// for the device to use what is still pending, so that the next round
// starts with an empty ring.
func TX(tx *guest.Queue, sink int, frame []byte, d time.Duration) (TXResult, error) {
	var payload, frames atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 128<<10)
		for {
			n, _, err := unix.Recvfrom(sink, buf, 0)
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
				frames.Add(1)
			}
		}
	}()
	t0 := time.Now()
	sent, err := Send(tx, frame, d)
	elapsed := time.Since(t0)
	// Count only what arrived within the round.
	r := TXResult{Sent: sent, Frames: frames.Load(), Payload: payload.Load()}
	close(stop)
	wg.Wait()
	if err != nil {
		return r, err
	}
	for deadline := time.Now().Add(2 * time.Second); tx.Pending() > 0 && time.Now().Before(deadline); {
		if _, ok, _ := tx.Poll(); !ok {
			time.Sleep(time.Millisecond)
		}
	}
	r.Mbps = float64(r.Payload) * 8 / 1e6 / elapsed.Seconds()
	return r, nil
}

// Send keeps tx full of frame (prefilled in guest memory, as a guest's
// frames already are) for d: it reaps used buffers, makes every free slot
// available again, kicks, and waits for an interrupt when the ring was
// full. It returns how many frames it made available.
func Send(tx *guest.Queue, frame []byte, d time.Duration) (uint64, error) {
	if err := tx.Prefill(frame); err != nil {
		return 0, err
	}
	var sent uint64
	for t0 := time.Now(); time.Since(t0) < d; {
		for {
			if _, ok, err := tx.Poll(); err != nil {
				return sent, fmt.Errorf("tx: %w", err)
			} else if !ok {
				break
			}
		}
		pushed := false
		for tx.Free() > 0 && tx.PushOutInPlace() == nil {
			sent++
			pushed = true
		}
		tx.Kick1()
		if !pushed {
			tx.WaitInterrupt(time.Millisecond)
		}
	}
	return sent, nil
}

// RXConfig says how RX's driver takes the host's frames.
type RXConfig struct {
	// Mergeable: frames span buffers (MRG_RXBUF, RecvMergeableLen);
	// otherwise each frame is one buffer with a 12-byte header.
	Mergeable bool
	BufSize   int            // bytes per RX buffer posted
	HostSent  *atomic.Uint64 // if not nil, counts the frames the host's kernel took (gsosend.Start)
}

// RX has the host send 64 KiB TCP frames (gsosend) on the link ifindex
// for d while the driver keeps rx full of buffers and takes what is used,
// reading only the header (a guest hands the pages to its stack without
// copying). It returns the TCP payload rate the driver received, in
// Mbit/s, after draining what is left for 200 ms so that the next round
// starts empty.
func RX(rx *guest.Queue, ifindex int, c RXConfig, d time.Duration) (float64, error) {
	stop, err := gsosend.Start(ifindex, c.HostSent)
	if err != nil {
		return 0, err
	}
	var bytes uint64
	fill := func() {
		for rx.Free() > 0 && rx.PushIn(c.BufSize) == nil {
		}
		rx.Kick1()
	}
	fill()
	t0 := time.Now()
	for time.Since(t0) < d {
		got := false
		for rx.DeviceUsedIdx() != rx.LastUsed() {
			var n int
			if c.Mergeable {
				_, fl, err := rx.RecvMergeableLen(time.Second)
				if err != nil {
					stop()
					return 0, fmt.Errorf("rx: %w", err)
				}
				n = fl
			} else {
				el, ok, err := rx.PollPrefix(12)
				if err == nil && !ok {
					err = errors.New("the used index moved but no used element was there")
				}
				if err != nil {
					stop()
					return 0, fmt.Errorf("rx: %w", err)
				}
				n = int(el.Len) - 12
			}
			if n > 54 {
				bytes += uint64(n - 54)
			}
			got = true
		}
		fill()
		if !got {
			rx.WaitInterrupt(time.Millisecond)
		}
	}
	elapsed := time.Since(t0)
	stop()
	for deadline := time.Now().Add(200 * time.Millisecond); time.Now().Before(deadline); {
		if _, ok, _ := rx.Poll(); !ok {
			time.Sleep(time.Millisecond)
		}
	}
	return float64(bytes) * 8 / 1e6 / elapsed.Seconds(), nil
}
