package vufront

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/netctl/netctl/vhostnet/guest"
	"github.com/netctl/netctl/vhostuser"
	"github.com/netctl/netctl/virtio"
)

// SetupQueues lays out n queue pairs in guest memory (on the first call;
// later calls reuse them), then sends SET_MEM_TABLE with the memfd (one
// region: GPA 0, this process's address of the mapping), and for every
// ring SET_VRING_NUM, SET_VRING_BASE 0, SET_VRING_ADDR, SET_VRING_KICK and
// SET_VRING_CALL, then SET_VRING_ENABLE 1 for each (with protocol
// features a ring starts disabled), and fills the RX rings.
func (f *Frontend) SetupQueues(n int) error {
	if n < 1 || n > 128 {
		return fmt.Errorf("vufront: %d queue pairs: use 1 to 128", n)
	}
	if len(f.pairs) == 0 {
		if err := f.layout(n); err != nil {
			return err
		}
	} else if n != len(f.pairs) {
		return fmt.Errorf("vufront: %d queue pairs asked, %d laid out", n, len(f.pairs))
	}
	return f.program(func(*guest.Queue) uint16 { return 0 })
}

// layout creates the rings and sizes the RX chains.
func (f *Frontend) layout(n int) error {
	rx, tx := f.cfg.RX, f.cfg.TX
	if f.mergeable && rx.BufSize == 0 {
		rx.BufSize = 4096
	}
	for i := 0; i < n; i++ {
		r, err := guest.NewQueue(f.mem, rx)
		if err != nil {
			return fmt.Errorf("vufront: RX ring of pair %d: %w", i, err)
		}
		t, err := guest.NewQueue(f.mem, tx)
		if err != nil {
			r.Close()
			return fmt.Errorf("vufront: TX ring of pair %d: %w", i, err)
		}
		f.pairs = append(f.pairs, &Pair{RX: r, TX: t})
	}
	f.rxChain = f.cfg.RXChain
	if f.rxChain == 0 || f.mergeable {
		f.rxChain = f.pairs[0].RX.BufSize()
	}
	return nil
}

// program sends the memory table and every ring (at the base base(q)
// gives), enables them and fills the RX rings.
func (f *Frontend) program(base func(*guest.Queue) uint16) error {
	region := vhostuser.MemRegion{Size: uint64(f.mem.Len()), UserAddr: f.mem.VA(0)}
	if err := f.send(vhostuser.SetMemTable, vhostuser.MemoryTable{Regions: []vhostuser.MemRegion{region}}, f.mem.FD()); err != nil {
		return err
	}
	f.enabled = make([]bool, 2*len(f.pairs))
	for q := range f.enabled {
		if err := f.startRing(q, base(f.ring(q))); err != nil {
			return err
		}
	}
	for q := range f.enabled {
		if err := f.EnableRing(q, true); err != nil {
			return err
		}
	}
	for _, p := range f.pairs {
		if err := f.refill(p); err != nil {
			return err
		}
	}
	return nil
}

// ring is vhost-user queue q's ring: pair q/2, RX for even q, TX for odd.
func (f *Frontend) ring(q int) *guest.Queue {
	if q%2 == 0 {
		return f.pairs[q/2].RX
	}
	return f.pairs[q/2].TX
}

func (f *Frontend) checkRing(q int) error {
	if q < 0 || q >= 2*len(f.pairs) {
		return fmt.Errorf("vufront: ring %d: have %d (2 per queue pair)", q, 2*len(f.pairs))
	}
	return nil
}

// startRing is QEMU's vhost_virtqueue_start for ring q: NUM, BASE, ADDR
// (user addresses; with logging on, VHOST_VRING_F_LOG and the used
// ring's GPA), KICK, CALL.
func (f *Frontend) startRing(q int, base uint16) error {
	r := f.ring(q)
	idx := uint32(q)
	if err := f.send(vhostuser.SetVringNum, vhostuser.VringState{Index: idx, Num: uint32(r.Num())}); err != nil {
		return err
	}
	if err := f.send(vhostuser.SetVringBase, vhostuser.VringState{Index: idx, Num: uint32(base)}); err != nil {
		return err
	}
	if err := f.send(vhostuser.SetVringAddr, f.vringAddr(q)); err != nil {
		return err
	}
	if err := f.send(vhostuser.SetVringKick, vhostuser.RingFile{Index: idx}, r.KickFD()); err != nil {
		return err
	}
	return f.send(vhostuser.SetVringCall, vhostuser.RingFile{Index: idx}, r.CallFD())
}

func (f *Frontend) vringAddr(q int) vhostuser.VringAddr {
	r := f.ring(q)
	d, a, u := r.Addrs()
	va := vhostuser.VringAddr{Index: uint32(q), Desc: d, Avail: a, Used: u}
	if f.acked.Has(virtio.LogAll) {
		va.Flags, va.Log = vhostuser.VringAddrFlagLog, r.UsedGPA()
	}
	return va
}

// EnableRing sends SET_VRING_ENABLE for ring q (pair q/2; even RX, odd TX).
func (f *Frontend) EnableRing(q int, on bool) error {
	if err := f.checkRing(q); err != nil {
		return err
	}
	var v uint32
	if on {
		v = 1
	}
	if err := f.send(vhostuser.SetVringEnable, vhostuser.VringState{Index: uint32(q), Num: v}); err != nil {
		return err
	}
	f.enabled[q] = on
	return nil
}

// StopRing sends GET_VRING_BASE for ring q, which stops it, and returns
// the backend's next avail index for it.
func (f *Frontend) StopRing(q int) (uint16, error) {
	if err := f.checkRing(q); err != nil {
		return 0, err
	}
	if err := f.write(vhostuser.NewMessage(vhostuser.GetVringBase, vhostuser.VringState{Index: uint32(q)})); err != nil {
		return 0, err
	}
	p, err := f.reply(vhostuser.GetVringBase, vhostuser.VringStateSize)
	if err != nil {
		return 0, err
	}
	if i := binary.LittleEndian.Uint32(p); i != uint32(q) {
		return 0, fmt.Errorf("vufront: GET_VRING_BASE %d answered for ring %d", q, i)
	}
	return uint16(binary.LittleEndian.Uint32(p[4:])), nil
}

// StartRing restarts ring q at base (StopRing's answer) and enables it,
// then kicks it so that what was made available meanwhile is seen.
func (f *Frontend) StartRing(q int, base uint16) error {
	if err := f.checkRing(q); err != nil {
		return err
	}
	if err := f.startRing(q, base); err != nil {
		return err
	}
	if err := f.EnableRing(q, true); err != nil {
		return err
	}
	return f.ring(q).Notify()
}

// EnableLog gives the backend a dirty log (LOG_SHMFD: SET_LOG_BASE with a
// memfd, one bit per 4 KiB guest page) and turns logging on:
// SET_FEATURES with VHOST_F_LOG_ALL, and SET_VRING_ADDR with
// VHOST_VRING_F_LOG and the used ring's GPA for every ring (QEMU's
// vhost_dev_set_log). Needs LOG_SHMFD negotiated and LOG_ALL offered.
func (f *Frontend) EnableLog() error {
	if !f.proto.Has(vhostuser.ProtocolLogShmFD) {
		return fmt.Errorf("vufront: dirty log: LOG_SHMFD not negotiated (protocol %v)", f.proto)
	}
	if !f.offered.Has(virtio.LogAll) {
		return fmt.Errorf("vufront: dirty log: the backend does not offer LOG_ALL (offers %v)", f.offered)
	}
	if f.log == nil {
		l, err := newDirtyLog(f.mem.Len())
		if err != nil {
			return err
		}
		f.log = l
	}
	// SET_LOG_BASE has its own reply with LOG_SHMFD (the log is mapped),
	// so QEMU sends it without NEED_REPLY.
	m := vhostuser.NewMessage(vhostuser.SetLogBase, vhostuser.Log{MmapSize: uint64(len(f.log.buf))}, f.log.fd)
	if err := f.write(m); err != nil {
		return err
	}
	if _, err := f.reply(vhostuser.SetLogBase, vhostuser.U64Size); err != nil {
		return err
	}
	if err := f.setFeatures(f.acked | virtio.LogAll); err != nil {
		return err
	}
	for q := 0; q < 2*len(f.pairs); q++ {
		if err := f.send(vhostuser.SetVringAddr, f.vringAddr(q)); err != nil {
			return err
		}
	}
	return nil
}

// Reconnect dials the socket again (waiting until ctx ends for a
// restarted backend) and repeats the whole handshake on the same memory
// and rings, each ring restarting at the index the device had used, as
// QEMU does after its chardev reconnects (virtio_queue_restore_last_avail_idx:
// what was in flight is sent again).
func (f *Frontend) Reconnect(ctx context.Context, want, required virtio.Features, proto vhostuser.ProtocolFeatures) error {
	f.Disconnect()
	if err := f.dial(ctx); err != nil {
		return err
	}
	if _, err := f.Negotiate(want&^virtio.LogAll, required, proto); err != nil {
		return err
	}
	if err := f.program(func(q *guest.Queue) uint16 { return q.DeviceUsedIdx() }); err != nil {
		return err
	}
	for q := 0; q < 2*len(f.pairs); q++ {
		if err := f.ring(q).Notify(); err != nil {
			return err
		}
	}
	return nil
}
