package main

import (
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/vhostnet"
	"github.com/netctl/netctl/vhostnet/guest"
	"github.com/netctl/netctl/virtio"
)

// The setup benchmarks time setup (NewNIC: open /dev/vhost-net to the last
// SET_BACKEND) and teardown (Close: SET_BACKEND -1, GET_VRING_BASE,
// close) apart. Teardown is mostly close(): vhost-net's release waits for
// an RCU grace period (synchronize_rcu in vhost_net_release), which
// netctl's code cannot shorten and which would hide any difference in the
// setup if the two were summed.

// setupConfig is one queue pair over backend, rings in mem.
func setupConfig(mem *guest.Memory, rx, tx *guest.Queue, backend int) vhostnet.NICConfig {
	return vhostnet.NICConfig{Features: virtio.Version1, Queues: []vhostnet.QueuePair{vhostnet.NewQueuePair(rx, tx, backend)},
		Memory: []vhostnet.MemoryRegion{{Size: uint64(len(mem.Buf)), UserAddr: mem.VA(0)}}}
}

// setupTimes is the mean time of one setup and one teardown, in ns.
type setupTimes struct{ setup, teardown float64 }

func (s setupTimes) total() float64 { return s.setup + s.teardown }

// nsPerSetup times iters NewNIC+Close cycles, each phase apart.
func nsPerSetup(cfg vhostnet.NICConfig, iters int) setupTimes {
	var setup, teardown time.Duration
	for i := 0; i < iters; i++ {
		t0 := time.Now()
		n, err := vhostnet.NewNIC(cfg)
		if err != nil {
			fatal("setup %d of %d: %v", i+1, iters, err)
		}
		t1 := time.Now()
		if err := n.Close(); err != nil {
			fatal("teardown %d of %d: %v", i+1, iters, err)
		}
		setup, teardown = setup+t1.Sub(t0), teardown+time.Since(t1)
	}
	return setupTimes{float64(setup.Nanoseconds()) / float64(iters), float64(teardown.Nanoseconds()) / float64(iters)}
}

// split turns rounds of setupTimes into rounds of setup, of teardown and
// of the two summed.
func split(rs []setupTimes) (setup, teardown, total []float64) {
	for _, r := range rs {
		setup, teardown, total = append(setup, r.setup), append(teardown, r.teardown), append(total, r.total())
	}
	return
}

// benchSetup: one queue pair set up and torn down by netctl (NewNIC,
// Close) against a minimal C program doing the same ioctls, rounds
// interleaved. Three lines from the same rounds: setup alone, teardown
// alone, and the two summed (the schema-1 figure). Goal: <= 1.2x each.
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
	const iters = 60
	nsPerSetup(cfg, 20) // warm up
	runC(20)
	var goRounds, cRounds []setupTimes
	for r := 0; r < *setupRounds; r++ {
		goRounds = append(goRounds, nsPerSetup(cfg, iters))
		s, td := runC(iters)
		cRounds = append(cRounds, setupTimes{s, td})
	}
	gs, gt, gsum := split(goRounds)
	cs, ct, csum := split(cRounds)
	const ioctls = "open, SET_OWNER, SET_FEATURES, SET_MEM_TABLE, 2x(NUM, BASE, ADDR, KICK, CALL, ERR), 2x SET_BACKEND, 2x(SET_BACKEND -1, GET_VRING_BASE), close"
	for _, l := range []struct {
		bench, unit, what string
		a, b              []float64
	}{
		{"vhostnet_queue_pair_setup_only_netctl_vs_c", "µs per queue-pair setup (open to the last SET_BACKEND)",
			"open, SET_OWNER, SET_FEATURES, SET_MEM_TABLE, 2x(NUM, BASE, ADDR, KICK, CALL, ERR), 2x SET_BACKEND", gs, cs},
		{"vhostnet_queue_pair_teardown_netctl_vs_c", "µs per queue-pair teardown (SET_BACKEND -1 to close)",
			"2x(SET_BACKEND -1, GET_VRING_BASE), close (close waits for an RCU grace period)", gt, ct},
		{"vhostnet_queue_pair_setup_netctl_vs_c", "µs per queue-pair setup and teardown", ioctls, gsum, csum},
	} {
		a, b := side("netctl", l.a, 1e-3, 2), side("c", l.b, 1e-3, 2)
		emit(Line{Bench: l.bench, Unit: l.unit, A: a, B: b,
			Goal: "ratio at most 1.2", Meets: t(a.Value/b.Value <= 1.2),
			Details: map[string]any{"ioctls": l.what, "iterations_per_round": iters}})
	}
}

// devicePool holds set-up vhost-net devices, each over its own AF_PACKET
// socket, so that the setup under test runs next to many others.
type devicePool struct {
	cfg  func(backend int) vhostnet.NICConfig
	nics []*vhostnet.NIC
	fds  []int
}

// resize sets up or tears down devices until n are held. Both run on
// several threads at once (close waits for a grace period, and waits on
// several threads share one), so a round's resize does not dominate the
// benchmark's run time.
func (p *devicePool) resize(n int) {
	const workers = 16
	var wg sync.WaitGroup
	var mu sync.Mutex // guards nics, fds, firstErr
	var firstErr error
	if add := n - len(p.nics); add > 0 {
		jobs := make(chan struct{}, add)
		for i := 0; i < add; i++ {
			jobs <- struct{}{}
		}
		close(jobs)
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range jobs {
					s, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
					var nic *vhostnet.NIC
					if err == nil {
						if nic, err = vhostnet.NewNIC(p.cfg(s)); err != nil {
							unix.Close(s)
						}
					}
					mu.Lock()
					if err != nil && firstErr == nil {
						firstErr = err
					} else if err == nil {
						p.nics, p.fds = append(p.nics, nic), append(p.fds, s)
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if firstErr != nil {
			fatal("holding %d devices: %v", n, firstErr)
		}
		return
	}
	drop, dropFDs := p.nics[n:], p.fds[n:]
	p.nics, p.fds = p.nics[:n], p.fds[:n]
	jobs := make(chan int, len(drop))
	for i := range drop {
		jobs <- i
	}
	close(jobs)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				drop[i].Close()
				unix.Close(dropFDs[i])
			}
		}()
	}
	wg.Wait()
}

// interleaveSized measures with 1000 devices held, then with 10, and
// again, rounds times each (A B A B ...): resize(n) sets the number held
// before each measurement.
func interleaveSized(rounds int, resize func(n int), measure func() setupTimes) (at1000, at10 []setupTimes) {
	for r := 0; r < rounds; r++ {
		resize(1000)
		at1000 = append(at1000, measure())
		resize(10)
		at10 = append(at10, measure())
	}
	return at1000, at10
}

// benchScale: the per-device setup and teardown with 1000 vhost-net
// devices held open (each set up, with an AF_PACKET socket as its
// backend) against 10, in interleaved rounds: before each "1000" round
// the pool grows to 1000, before each "10" round it shrinks back to 10
// (neither resize is timed). Goal: <= 1.2x.
func benchScale() {
	mem, err := guest.NewMemory(16 << 20)
	if err != nil {
		fatal("%v", err)
	}
	defer mem.Close()
	rx, _ := guest.NewQueue(mem, guest.QueueConfig{})
	tx, _ := guest.NewQueue(mem, guest.QueueConfig{})
	pool := &devicePool{cfg: func(s int) vhostnet.NICConfig { return setupConfig(mem, rx, tx, s) }}
	defer pool.resize(0)
	probe, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		fatal("%v", err)
	}
	defer unix.Close(probe)
	cfg := setupConfig(mem, rx, tx, probe)
	const iters = 40
	pool.resize(10)
	nsPerSetup(cfg, 20)
	var resize []float64
	at1000, at10 := interleaveSized(*setupRounds, func(n int) {
		t0 := time.Now()
		pool.resize(n)
		if n == 1000 {
			resize = append(resize, round(time.Since(t0).Seconds(), 2))
		}
	}, func() setupTimes { return nsPerSetup(cfg, iters) })
	as, at, asum := split(at1000)
	bs, bt, bsum := split(at10)
	for _, l := range []struct {
		bench, unit string
		a, b        []float64
	}{
		{"vhostnet_setup_only_1000_open_vs_10", "µs per device setup (NewNIC)", as, bs},
		{"vhostnet_teardown_1000_open_vs_10", "µs per device teardown (Close)", at, bt},
		{"vhostnet_setup_1000_open_vs_10", "µs per device setup and teardown", asum, bsum},
	} {
		a, b := side("with_1000_open", l.a, 1e-3, 2), side("with_10_open", l.b, 1e-3, 2)
		emit(Line{Bench: l.bench, Unit: l.unit, A: a, B: b,
			Goal: "ratio at most 1.2", Meets: t(a.Value/b.Value <= 1.2),
			Details: map[string]any{"iterations_per_round": iters, "seconds_to_grow_to_1000": resize,
				"note": "rounds interleave: grow the pool to 1000, time, shrink it to 10, time, and again"}})
	}
}
