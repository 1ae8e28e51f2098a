package selftest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/vhostnet"
	"github.com/netctl/netctl/vhostnet/guest"
)

// progress tells when a phase has stalled: nothing changed for
// stallTimeout.
type progress struct {
	last  uint64
	since time.Time
}

func (p *progress) stalled(now uint64) bool {
	if now != p.last || p.since.IsZero() {
		p.last, p.since = now, time.Now()
		return false
	}
	return time.Since(p.since) > stallTimeout
}

// guestToHost sends o.Frames frames on every TX queue and checks, on the
// host's packet socket, that each arrives once and intact. Its receiver
// goroutine has ended when it returns, whatever the outcome.
func guestToHost(ctx context.Context, o Options, rep *Report, nic *vhostnet.NIC, tap *macvtap.Tap, sock int, txq []*guest.Queue) (err error) {
	t := newTally(false, o.Queues, o.Frames, o.FrameSize)
	recv := startReceiver(sock, t)
	defer func() {
		if rerr := recv.stop(); rerr != nil && err == nil {
			err = fmt.Errorf("selftest: guest to host: the host's packet socket: %w", rerr)
		}
	}()
	if o.inject != nil {
		if err := o.inject("tx", nic, tap); err != nil {
			return fmt.Errorf("selftest: guest to host: %w", err)
		}
	}
	planned := uint64(o.Frames * o.Queues)
	hdr := guest.NetHdr{}.Append(nil, 12)
	var sent, used uint64
	next := make([]int, o.Queues)
	var p progress
	t0 := time.Now()
	pollUsed := func() error {
		for q, tq := range txq {
			for {
				_, ok, err := tq.Poll()
				if err != nil {
					return fmt.Errorf("selftest: queue %d TX: %w", q, err)
				}
				if !ok {
					break
				}
				rep.Queues[q].TXUsed++
				used++
			}
		}
		return nil
	}
	for sent < planned {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("selftest: guest to host: %w after %s", err, time.Since(t0).Round(time.Millisecond))
		}
		if err := pollUsed(); err != nil {
			return err
		}
		for q, tq := range txq {
			for next[q] < o.Frames && tq.Free() > 0 && sent-recv.received() < txWindow {
				if err := tq.PushOut(append(hdr, testFrame(false, q, next[q], o.FrameSize)...)); err != nil {
					return fmt.Errorf("selftest: queue %d TX: %w", q, err)
				}
				next[q]++
				sent++
				rep.Queues[q].TXSent++
			}
			tq.Kick1()
		}
		if p.stalled(sent + used + recv.received()) {
			break
		}
		time.Sleep(50 * time.Microsecond)
	}
	// Let the last frames reach the host socket, and vhost's last used
	// entries reach the driver.
	for (recv.received() < sent || used < sent) && !p.stalled(used+recv.received()) {
		if err := pollUsed(); err != nil {
			return err
		}
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(t0).Seconds()
	if err := recv.stop(); err != nil {
		return fmt.Errorf("selftest: guest to host: the host's packet socket: %w", err)
	}
	for q := range rep.Queues {
		rep.Queues[q].TXPackets, rep.Queues[q].TXBytes = t.intact[q], t.bytes[q]
	}
	rep.GuestToHost = t.direction(planned, sent, elapsed)
	return nil
}

// hostToGuest sends o.Frames frames per queue pair from the host's packet
// socket, queue pair q's flow for frame i%Queues, and checks that the
// guest receives each once and intact. It returns how many RX headers had
// num_buffers other than 1.
func hostToGuest(ctx context.Context, o Options, rep *Report, nic *vhostnet.NIC, tap *macvtap.Tap, sock, ifindex int, rxq []*guest.Queue) (mrgBad int, err error) {
	if o.inject != nil {
		if err := o.inject("rx", nic, tap); err != nil {
			return 0, fmt.Errorf("selftest: host to guest: %w", err)
		}
	}
	t := newTally(true, o.Queues, o.Frames, o.FrameSize)
	for _, rq := range rxq {
		for rq.Free() > 0 {
			rq.PushIn(2048)
		}
		rq.Kick1()
	}
	to := &unix.SockaddrLinklayer{Ifindex: ifindex, Halen: 6}
	copy(to.Addr[:], guest.GuestMAC)
	planned := uint64(o.Frames * o.Queues)
	var sent, taken uint64 // taken: our frames the guest took, intact or not
	recvAll := func() error {
		for q, rq := range rxq {
			for rq.DeviceUsedIdx() != rq.LastUsed() {
				h, f, err := rq.RecvMergeable(time.Second)
				if err != nil {
					return fmt.Errorf("selftest: queue %d RX: %w", q, err)
				}
				if h.NumBuffers != 1 {
					mrgBad++
				}
				before := t.received
				if t.add(f) {
					taken++
				}
				if t.received > before {
					rep.Queues[q].RXPackets++
					rep.Queues[q].RXBytes += uint64(len(f))
				}
			}
			for rq.Free() > 0 {
				rq.PushIn(2048)
			}
			rq.Kick1()
		}
		return nil
	}
	var p progress
	t0 := time.Now()
send:
	for i := 0; uint64(i) < planned; i++ {
		f := testFrame(true, i%o.Queues, i/o.Queues, o.FrameSize)
		for {
			if err := ctx.Err(); err != nil {
				return mrgBad, fmt.Errorf("selftest: host to guest: %w after %s", err, time.Since(t0).Round(time.Millisecond))
			}
			if err := recvAll(); err != nil {
				return mrgBad, err
			}
			if sent-taken < rxWindow {
				err := unix.Sendto(sock, f, 0, to)
				if err == nil {
					sent++
					break
				}
				if !errors.Is(err, unix.ENOBUFS) && !errors.Is(err, unix.EAGAIN) {
					return mrgBad, fmt.Errorf("selftest: host send: %w", err)
				}
			}
			if p.stalled(sent + taken) {
				break send
			}
			time.Sleep(50 * time.Microsecond)
		}
	}
	for taken < sent && !p.stalled(taken) {
		if err := recvAll(); err != nil {
			return mrgBad, err
		}
		time.Sleep(time.Millisecond)
	}
	rep.HostToGuest = t.direction(planned, sent, time.Since(t0).Seconds())
	return mrgBad, nil
}

// direction sums a tally up.
func (t *tally) direction(planned, sent uint64, seconds float64) Direction {
	d := Direction{Planned: planned, Sent: sent, Received: t.received, Lost: planned - min(planned, t.received),
		Corrupted: t.corrupt, Duplicate: t.dup, Seconds: seconds}
	var b uint64
	for _, n := range t.bytes {
		b += n
	}
	if seconds > 0 {
		d.Mbps = float64(b) * 8 / 1e6 / seconds
	}
	return d
}
