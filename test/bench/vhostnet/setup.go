package main

import (
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/vhostnet"
	"github.com/netctl/netctl/vhostnet/guest"
	"github.com/netctl/netctl/virtio"
)

// setupConfig is one queue pair over backend, rings in mem.
func setupConfig(mem *guest.Memory, rx, tx *guest.Queue, backend int) vhostnet.NICConfig {
	return vhostnet.NICConfig{Features: virtio.Version1, Queues: []vhostnet.QueuePair{vhostnet.NewQueuePair(rx, tx, backend)},
		Memory: []vhostnet.MemoryRegion{{Size: uint64(len(mem.Buf)), UserAddr: mem.VA(0)}}}
}

// nsPerSetup times iters NewNIC+Close cycles.
func nsPerSetup(cfg vhostnet.NICConfig, iters int) float64 {
	t0 := time.Now()
	for i := 0; i < iters; i++ {
		n, err := vhostnet.NewNIC(cfg)
		if err != nil {
			fatal("setup %d of %d: %v", i+1, iters, err)
		}
		n.Close()
	}
	return float64(time.Since(t0).Nanoseconds()) / float64(iters)
}

// benchSetup: one queue pair set up and torn down by netctl (NewNIC,
// Close) against a minimal C program doing the same ioctls. Goal: <= 1.2x.
func benchSetup() {
	tap, err := macvtap.CreateTap(macvtap.TapConfig{Name: "bnsetup0", VnetHdr: true, VnetHdrSize: 12})
	if err != nil {
		fatal("%v", err)
	}
	defer tap.Close()
	mem, err := guest.NewMemory(16 << 20)
	if err != nil {
		fatal("%v", err)
	}
	defer mem.Close()
	rx, _ := guest.NewQueue(mem, guest.QueueConfig{})
	tx, _ := guest.NewQueue(mem, guest.QueueConfig{})
	cfg := setupConfig(mem, rx, tx, tap.FD())
	const iters = 300
	nsPerSetup(cfg, 20) // warm up
	runC(20)
	a, b := interleave(func() float64 { return nsPerSetup(cfg, iters) }, func() float64 { return runC(iters) })
	emit(Line{Bench: "vhostnet_queue_pair_setup_netctl_vs_c", Unit: "µs per queue-pair setup and teardown",
		A: Side{Name: "netctl", Value: round(a/1e3, 2)}, B: Side{Name: "c", Value: round(b/1e3, 2)},
		Goal: "ratio at most 1.2", Meets: t(a/b <= 1.2),
		Details: map[string]any{"ioctls": "open, SET_OWNER, SET_FEATURES, SET_MEM_TABLE, 2x(NUM, BASE, ADDR, KICK, CALL, ERR), 2x SET_BACKEND, 2x(SET_BACKEND -1, GET_VRING_BASE), close"}})
}

// benchScale: the same per-device setup with 1000 vhost-net devices held
// open (each set up, with an AF_PACKET socket as its backend) against 10.
// Goal: <= 1.2x.
func benchScale() {
	mem, err := guest.NewMemory(16 << 20)
	if err != nil {
		fatal("%v", err)
	}
	defer mem.Close()
	rx, _ := guest.NewQueue(mem, guest.QueueConfig{})
	tx, _ := guest.NewQueue(mem, guest.QueueConfig{})
	var held []*vhostnet.NIC
	var socks []int
	hold := func(n int) {
		for len(held) < n {
			s, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				fatal("%v", err)
			}
			socks = append(socks, s)
			nic, err := vhostnet.NewNIC(setupConfig(mem, rx, tx, s))
			if err != nil {
				fatal("holding %d devices: %v", len(held), err)
			}
			held = append(held, nic)
		}
	}
	defer func() {
		for _, n := range held {
			n.Close()
		}
		for _, s := range socks {
			unix.Close(s)
		}
	}()
	probe, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		fatal("%v", err)
	}
	defer unix.Close(probe)
	cfg := setupConfig(mem, rx, tx, probe)
	const iters = 200
	hold(10)
	nsPerSetup(cfg, 20)
	var at10, at1000 []float64
	for r := 0; r < *rounds; r++ {
		at10 = append(at10, nsPerSetup(cfg, iters))
	}
	hold(1000)
	for r := 0; r < *rounds; r++ {
		at1000 = append(at1000, nsPerSetup(cfg, iters))
	}
	a, b := median(at1000), median(at10)
	emit(Line{Bench: "vhostnet_setup_1000_open_vs_10", Unit: "µs per device setup and teardown",
		A: Side{Name: "with_1000_open", Value: round(a/1e3, 2)}, B: Side{Name: "with_10_open", Value: round(b/1e3, 2)},
		Goal: "ratio at most 1.2", Meets: t(a/b <= 1.2),
		Details: map[string]any{"note": "the 1000 held devices are set up before the second side runs, so the two sides cannot interleave"}})
}
