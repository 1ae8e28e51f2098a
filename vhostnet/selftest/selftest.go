// Package selftest sets up a vhost-net NIC on this host and passes traffic
// through it, for operators who want to see that the kernel's data path
// works here (netctl selftest).
//
// Everything happens in a private network namespace: a throwaway tap with
// N queues, one vhost-net device per queue pair, the built-in userspace
// virtio-net driver as the guest, and an AF_PACKET socket on the tap as the
// host side. Nothing touches the machine's interfaces, and the namespace,
// tap, fds and goroutines are gone when Run returns.
//
// The run passes only if every frame arrives once and byte for byte in
// both directions, and if what the kernel reports back (the tap's header
// size, flags and offloads; the effects of the acknowledged features)
// matches what was set.
package selftest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/vhostnet"
	"github.com/netctl/netctl/vhostnet/guest"
	"github.com/netctl/netctl/virtio"
)

// Limits of Options.
const (
	MaxQueues    = linux.MAX_TAP_QUEUES // a tap's queue limit (256)
	MaxFrames    = 100000               // per direction and queue
	MinFrameSize = 60                   // Ethernet minimum without FCS
	MaxFrameSize = 2048 - 12            // one 2 KiB RX buffer with the 12-byte header
)

// ErrInvalid is wrapped by Run's error for options out of range.
var ErrInvalid = errs.ErrInvalid

// Options say how much traffic to pass. Zero values take the defaults.
type Options struct {
	Queues    int           // queue pairs, 1 to MaxQueues (default 1)
	Frames    int           // frames per direction and queue, 1 to MaxFrames (default 2000)
	FrameSize int           // Ethernet frame size, MinFrameSize to MaxFrameSize (default 1514)
	Timeout   time.Duration // for the whole run (default 60s)

	// inject, set only by this package's tests, runs at the start of a
	// phase ("tx", "rx") and may fail it or disturb the NIC.
	inject func(phase string, nic *vhostnet.NIC, tap *macvtap.Tap) error
}

// check fills in the defaults and refuses values out of range.
func (o *Options) check() error {
	if o.Queues == 0 {
		o.Queues = 1
	}
	if o.Frames == 0 {
		o.Frames = 2000
	}
	if o.FrameSize == 0 {
		o.FrameSize = 1514
	}
	if o.Timeout == 0 {
		o.Timeout = 60 * time.Second
	}
	switch {
	case o.Queues < 1 || o.Queues > MaxQueues:
		return fmt.Errorf("selftest: %d queue pairs: %w: use 1 to %d", o.Queues, ErrInvalid, MaxQueues)
	case o.Frames < 1 || o.Frames > MaxFrames:
		return fmt.Errorf("selftest: %d frames: %w: use 1 to %d per direction and queue", o.Frames, ErrInvalid, MaxFrames)
	case o.FrameSize < MinFrameSize || o.FrameSize > MaxFrameSize:
		return fmt.Errorf("selftest: frame size %d: %w: use %d to %d bytes", o.FrameSize, ErrInvalid, MinFrameSize, MaxFrameSize)
	case o.Timeout < 0:
		return fmt.Errorf("selftest: timeout %s: %w: use a positive duration", o.Timeout, ErrInvalid)
	}
	return nil
}

// QueueStats counts what one queue pair carried.
type QueueStats struct {
	Queue      int    `json:"queue"`
	TXSent     uint64 `json:"tx_sent"`    // frames the guest made available on this queue
	TXUsed     uint64 `json:"tx_used"`    // of those, the ones vhost used
	TXPackets  uint64 `json:"tx_packets"` // of this queue's flow, received intact by the host
	TXBytes    uint64 `json:"tx_bytes"`
	RXPackets  uint64 `json:"rx_packets"` // received intact by the guest on this queue
	RXBytes    uint64 `json:"rx_bytes"`
	Kicks      uint64 `json:"kicks"`
	Interrupts uint64 `json:"interrupts"`
}

// Direction is what one direction carried, checked frame by frame.
type Direction struct {
	Planned   uint64  `json:"planned"`   // frames to send
	Sent      uint64  `json:"sent"`      // handed to vhost (guest to host) or to the tap (host to guest)
	Received  uint64  `json:"received"`  // arrived once and byte for byte
	Lost      uint64  `json:"lost"`      // planned but not received intact
	Corrupted uint64  `json:"corrupted"` // arrived with the wrong length or bytes
	Duplicate uint64  `json:"duplicate"`
	Seconds   float64 `json:"seconds"`
	Mbps      float64 `json:"mbit_s"` // intact frames' bytes
}

// Report is what a run negotiated, read back from the kernel and measured.
type Report struct {
	Kernel       string          `json:"kernel"`
	Offered      virtio.Features `json:"-"`
	OfferedNames []string        `json:"vhost_features"` // VHOST_GET_FEATURES, read back
	OfferedHex   string          `json:"vhost_features_hex"`
	// Acked is what VHOST_SET_FEATURES accepted on every device. vhost-net
	// has no call that reads the acknowledged word back (VHOST_GET_FEATURES
	// returns what it offers), so AckedInEffect lists the acknowledged
	// bits whose effect the run observed in the rings.
	Acked         virtio.Features `json:"-"`
	AckedNames    []string        `json:"acked_features"`
	AckedHex      string          `json:"acked_features_hex"`
	AckedInEffect []string        `json:"acked_in_effect"`
	HeaderSize    int             `json:"vnet_hdr_size"` // TUNGETVNETHDRSZ, read back
	Tap           string          `json:"tap"`
	TapFlags      []string        `json:"tap_flags"`            // TUNGETIFF, read back
	TapOffloads   []string        `json:"tap_offloads"`         // read back through ethtool netlink
	TapFeatures   []string        `json:"tap_ethtool_features"` // the ethtool features they come from
	Queues        []QueueStats    `json:"queues"`
	GuestToHost   Direction       `json:"guest_to_host"`
	HostToGuest   Direction       `json:"host_to_guest"`
}

// Run performs the self-test. It needs root (CAP_NET_ADMIN) and
// /dev/vhost-net; without them it returns an error that says what to do.
// When the run itself fails (a frame lost or corrupted, a read-back that
// differs), it returns the report and an error that says what failed.
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := o.check(); err != nil {
		return nil, err
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

// stallTimeout is how long a phase waits without any progress (no frame
// sent, used or received) before it gives up and counts what is missing.
const stallTimeout = 2 * time.Second

// window is how many frames may be in flight host to guest: fewer than one
// RX ring holds (256) and than the tap's queue (1000), so a frame is lost
// only if the data path loses it.
const (
	rxWindow = 128
	txWindow = 4096 // guest to host: well within the packet socket's 64 MiB buffer
)

func run(ctx context.Context, o Options) (*Report, error) {
	var uts unix.Utsname
	unix.Uname(&uts)
	rep := &Report{Kernel: unix.ByteSliceToString(uts.Release[:])}
	const hdrSize = 12
	acked := virtio.Version1 | virtio.NetMrgRxbuf | virtio.EventIdx
	offload := uint32(linux.TUN_F_CSUM | linux.TUN_F_TSO4 | linux.TUN_F_TSO6)
	setOffloads := []string{"csum", "tso4", "tso6"}

	tap, err := macvtap.CreateTap(macvtap.TapConfig{Name: "nctlst%d", VnetHdr: true, VnetHdrSize: hdrSize, Queues: o.Queues})
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
	// Protocol 0 until bind, so no other interface's frames queue up.
	sock, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("selftest: packet socket: %w", err)
	}
	defer unix.Close(sock)
	if err := unix.Bind(sock, &unix.SockaddrLinklayer{Protocol: linux.Htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
		return nil, fmt.Errorf("selftest: bind packet socket: %w", err)
	}
	// Not our own host-to-guest frames; past rmem_max (root only), so a
	// burst from vhost is not dropped here.
	unix.SetsockoptInt(sock, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1)
	unix.SetsockoptInt(sock, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 64<<20)
	tv := unix.NsecToTimeval(int64(50 * time.Millisecond))
	if err := unix.SetsockoptTimeval(sock, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return nil, fmt.Errorf("selftest: packet socket timeout: %w", err)
	}

	// Per queue pair: two rings of 256 entries and 256 2 KiB buffers.
	mem, err := guest.NewMemory(2<<20*o.Queues + 1<<20)
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
	rep.Queues = make([]QueueStats, o.Queues)
	for q := range rep.Queues {
		rep.Queues[q].Queue = q
	}

	// What the kernel reports back.
	var problems []string
	for q := range o.Queues {
		d, err := nic.Device(q)
		if err != nil {
			return nil, fmt.Errorf("selftest: %w", err)
		}
		if q == 0 {
			if rep.Offered, err = d.Features(); err != nil {
				return nil, fmt.Errorf("selftest: read vhost-net's features back: %w", err)
			}
			rep.Acked = d.Acked()
		} else if d.Acked() != rep.Acked {
			problems = append(problems, fmt.Sprintf("queue pair %d acknowledged %v, queue pair 0 %v", q, d.Acked(), rep.Acked))
		}
	}
	rep.OfferedNames, rep.OfferedHex = rep.Offered.Names(), fmt.Sprintf("%#x", uint64(rep.Offered))
	rep.AckedNames, rep.AckedHex = rep.Acked.Names(), fmt.Sprintf("%#x", uint64(rep.Acked))
	rep.AckedInEffect = []string{}
	rb, err := readTap(tap)
	if err != nil {
		return nil, fmt.Errorf("selftest: %w", err)
	}
	rep.HeaderSize, rep.TapFlags, rep.TapOffloads, rep.TapFeatures = rb.hdrSize, rb.flags, rb.offloads, rb.features
	if err := checkTap(rb, hdrSize, setOffloads); err != nil {
		problems = append(problems, err.Error())
	}

	if err := guestToHost(ctx, o, rep, nic, tap, sock, txq); err != nil {
		return rep, err
	}
	mrgBad, err := hostToGuest(ctx, o, rep, nic, tap, sock, ifi.Index, rxq)
	if err != nil {
		return rep, err
	}
	for q := range rep.Queues {
		rep.Queues[q].Kicks = txq[q].Kicks + rxq[q].Kicks
		rep.Queues[q].Interrupts = txq[q].Interrupts + rxq[q].Interrupts
	}

	// EVENT_IDX in effect: after draining each TX ring vhost published
	// avail_event (it writes it only with EVENT_IDX).
	eventIdx := true
	for q, tq := range txq {
		for deadline := time.Now().Add(time.Second); tq.AvailEvent() != tq.AvailIdx() && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		if tq.AvailEvent() != tq.AvailIdx() {
			eventIdx = false
			problems = append(problems, fmt.Sprintf("EVENT_IDX acknowledged, but queue pair %d's TX avail_event is %d after vhost used all %d frames",
				q, tq.AvailEvent(), tq.AvailIdx()))
		}
	}
	if eventIdx {
		rep.AckedInEffect = append(rep.AckedInEffect, "EVENT_IDX")
	}
	// MRG_RXBUF in effect: vhost wrote num_buffers (1: each frame fits
	// one buffer) into every RX header; without it the field stays 0.
	if mrgBad > 0 {
		problems = append(problems, fmt.Sprintf("MRG_RXBUF acknowledged, but %d RX headers had num_buffers other than 1", mrgBad))
	} else if rep.HostToGuest.Received > 0 {
		rep.AckedInEffect = append(rep.AckedInEffect, "MRG_RXBUF")
	}
	for _, c := range []struct {
		name string
		d    Direction
	}{{"guest to host", rep.GuestToHost}, {"host to guest", rep.HostToGuest}} {
		if err := c.d.check(c.name); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if len(problems) > 0 {
		return rep, fmt.Errorf("selftest: %s", strings.Join(problems, "; "))
	}
	return rep, nil
}

// check says what went wrong in one direction, if anything.
func (d Direction) check(name string) error {
	if d.Received == d.Planned && d.Sent == d.Planned && d.Corrupted == 0 && d.Duplicate == 0 {
		return nil
	}
	msg := fmt.Sprintf("%s: %d of %d frames lost, %d corrupted, %d duplicated", name, d.Lost, d.Planned, d.Corrupted, d.Duplicate)
	if d.Sent < d.Planned {
		msg += fmt.Sprintf(" (only %d could be sent: the data path stopped taking frames for %s)", d.Sent, stallTimeout)
	}
	return errors.New(msg)
}
