package vufront

import (
	"fmt"
	"time"

	"github.com/netctl/netctl/vhostnet/guest"
)

// HdrLen is the virtio-net header's length in every frame the frontend
// sends or receives: 12 with VERSION_1 or MRG_RXBUF (both acknowledged by
// Negotiate's callers here), else 10.
func (f *Frontend) HdrLen() int { return f.hdrLen }

// Send puts frame, after a virtio-net header hdr, on pair's TX ring and
// kicks. It does not wait for the backend to use it; Reclaim does.
func (f *Frontend) Send(pair int, hdr guest.NetHdr, frame []byte) error {
	p, err := f.pairOf(pair)
	if err != nil {
		return err
	}
	f.reclaim(p.TX)
	if err := p.TX.AddOut(append(hdr.Append(nil, f.hdrLen), frame...)); err != nil {
		return fmt.Errorf("vufront: send on queue pair %d: %w", pair, err)
	}
	return nil
}

// reclaim takes back the TX buffers the backend has used.
func (f *Frontend) reclaim(q *guest.Queue) {
	for {
		if _, ok, err := q.Poll(); !ok || err != nil {
			return
		}
	}
}

// SentUsed waits up to timeout until the backend has used every TX buffer
// of pair made available so far, and reports how many remain.
func (f *Frontend) SentUsed(pair int, timeout time.Duration) (int, error) {
	p, err := f.pairOf(pair)
	if err != nil {
		return 0, err
	}
	for deadline := time.Now().Add(timeout); p.TX.DeviceUsedIdx() != p.TX.AvailIdx() && time.Now().Before(deadline); {
		p.TX.WaitInterrupt(20 * time.Millisecond)
	}
	f.reclaim(p.TX)
	return p.TX.Pending(), nil
}

// Recv waits up to timeout for the next frame on pair's RX ring and returns
// its virtio-net header and the frame; it puts fresh buffers back. With
// MRG_RXBUF a frame may span several buffers (the header's NumBuffers).
func (f *Frontend) Recv(pair int, timeout time.Duration) (guest.NetHdr, []byte, error) {
	p, err := f.pairOf(pair)
	if err != nil {
		return guest.NetHdr{}, nil, err
	}
	var h guest.NetHdr
	var frame []byte
	if f.mergeable {
		h, frame, err = p.RX.RecvMergeable(timeout)
	} else {
		var el guest.Elem
		if el, err = p.RX.Used(timeout); err == nil {
			if h, err = guest.ParseNetHdr(el.Data, f.hdrLen); err == nil {
				frame = el.Data[f.hdrLen:]
			}
		}
	}
	if err != nil {
		return h, frame, fmt.Errorf("vufront: receive on queue pair %d: %w", pair, err)
	}
	if err := f.refill(p); err != nil {
		return h, frame, err
	}
	return h, frame, nil
}

// refill makes every free RX slot available again and kicks.
func (f *Frontend) refill(p *Pair) error {
	for p.RX.Free() > 0 && p.RX.Free()*p.RX.BufSize() >= f.rxChain {
		if err := p.RX.PushIn(f.rxChain); err != nil {
			return fmt.Errorf("vufront: RX buffer: %w", err)
		}
	}
	if err := p.RX.Kick1(); err != nil {
		return fmt.Errorf("vufront: RX kick: %w", err)
	}
	return nil
}
