package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/test/vduse"
	"github.com/netctl/netctl/vdpa"
	"github.com/netctl/netctl/vhostnet/guest"
	"github.com/netctl/netctl/virtio"
)

var vdpaC = flag.String("vdpa-c", "", "path of the compiled vdpa_setup.c")

// withVDPADevice serves a VDUSE net device added as a vdpa device and
// bound to vhost_vdpa, and runs f with its /dev/vhost-vdpa-N.
func withVDPADevice(name string, f func(path string)) {
	c, err := vdpa.Dial(context.Background())
	if err != nil {
		fatal("%v", err)
	}
	defer c.Close()
	dev, err := vduse.Create(vduse.Config{Name: name})
	if err != nil {
		fatal("%v", err)
	}
	defer dev.Close()
	if err := c.AddDevice(context.Background(), vdpa.AddOptions{Name: name, MgmtDev: "vduse"}); err != nil {
		fatal("%v", err)
	}
	defer c.DeleteDevice(context.Background(), name)
	path, err := vdpa.VhostVDPAPath(name)
	if err != nil {
		fatal("%v", err)
	}
	f(path)
}

func openVhostVDPA(path string) *vdpa.VhostDevice {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := vdpa.OpenVhost(ctx, path)
	if err != nil {
		fatal("%v", err)
	}
	return d
}

// benchIOTLB: mapping 1 GiB of guest memory as 512 regions of 2 MiB, in
// one IOTLB batch against one message per region (each a round trip to the
// VDUSE device).
func benchIOTLB() {
	mem, err := guest.NewMemory(1 << 30)
	if err != nil {
		fatal("%v", err)
	}
	defer mem.Close()
	const region = 2 << 20
	// Each round on a fresh VDUSE device, timing only the mapping: on one
	// device, a second unbatched round failed with EFAULT after about 1300
	// IOTLB updates (cause not found yet).
	rounds := 0
	run := func(batched bool) (ms float64) {
		rounds++
		withVDPADevice(fmt.Sprintf("bniotlb%d", rounds), func(path string) {
			d := openVhostVDPA(path)
			defer d.Close()
			if err := d.SetOwner(); err != nil {
				fatal("%v", err)
			}
			if _, err := d.NegotiateBackend(); err != nil {
				fatal("%v", err)
			}
			mapAll := func() error {
				for off := 0; off < len(mem.Buf); off += region {
					if err := d.Map(uint64(off), region, mem.VA(off), linux.VHOST_ACCESS_RW); err != nil {
						return err
					}
				}
				return nil
			}
			t0 := time.Now()
			if batched {
				err = d.Batch(mapAll)
			} else {
				err = mapAll()
			}
			if err != nil {
				fatal("map: %v", err)
			}
			ms = float64(time.Since(t0).Microseconds()) / 1e3
		})
		return ms
	}
	a, b := interleave(func() float64 { return run(false) }, func() float64 { return run(true) })
	emit(Line{Bench: "vdpa_iotlb_map_1gib_per_region_vs_batched", Unit: "ms to map 1 GiB as 512 regions of 2 MiB",
		A: side("one_message_per_region", a, 1, 2), B: side("one_batch", b, 1, 2),
		Goal: "report the ratio: what batching saves"})
}

// vdpaBringUp is one vhost-vdpa bring-up and teardown, the same calls as
// vdpa_setup.c.
func vdpaBringUp(path string, mem *guest.Memory, kick, call [2]int) {
	d := openVhostVDPA(path)
	must := func(err error) {
		if err != nil {
			fatal("bring-up: %v", err)
		}
	}
	must(d.SetOwner())
	_, err := d.NegotiateBackend()
	must(err)
	_, err = d.DeviceFeatures()
	must(err)
	must(d.SetStatus(linux.VIRTIO_CONFIG_S_ACKNOWLEDGE | linux.VIRTIO_CONFIG_S_DRIVER))
	must(d.SetFeatures(uint64(virtio.Version1 | virtio.AccessPlatform | virtio.NetMrgRxbuf | virtio.EventIdx | virtio.NetMAC)))
	st := uint8(linux.VIRTIO_CONFIG_S_ACKNOWLEDGE | linux.VIRTIO_CONFIG_S_DRIVER | linux.VIRTIO_CONFIG_S_FEATURES_OK)
	must(d.SetStatus(st))
	must(d.Batch(func() error { return d.MapMemory(0, mem, linux.VHOST_ACCESS_RW) }))
	for vq := uint32(0); vq < 2; vq++ {
		base := uint64(vq) * 3 * 4096
		must(d.SetVringNum(vq, 256))
		must(d.SetVringAddr(vq, base, base+4096, base+8192, 0, false))
		must(d.SetVringBase(vq, 0))
		must(d.SetVringKick(vq, kick[vq]))
		must(d.SetVringCall(vq, call[vq]))
		must(d.EnableVring(vq, true))
	}
	must(d.SetStatus(st | linux.VIRTIO_CONFIG_S_DRIVER_OK))
	must(d.Reset())
	d.Close()
}

// benchVDPASetup: vhost-vdpa bring-up and teardown over VDUSE by netctl
// against a minimal C program doing the same calls. Goal: <= 1.2x. Both
// sides are processes of their own, the VDUSE device served by this one:
// netctl's side is this binary again (-vdpa-bringup-child), so that
// neither shares a process, and the Go runtime's threads, with the VDUSE
// server it waits on at every status change (netctl attach never does).
func benchVDPASetup() {
	if *vdpaC == "" {
		fatal("-vdpa-c: the compiled vdpa_setup.c is needed")
	}
	self, err := os.Executable()
	if err != nil {
		fatal("%v", err)
	}
	withVDPADevice("bnvdsetup0", func(path string) {
		const iters = 100
		run := func(argv ...string) float64 {
			out, err := exec.Command(argv[0], argv[1:]...).Output()
			if err != nil {
				fatal("%v: %v: %s", argv, err, out)
			}
			var r struct {
				NS float64 `json:"ns_per_setup"`
			}
			if err := json.Unmarshal(out, &r); err != nil || r.NS <= 0 {
				fatal("%v printed %q", argv, out)
			}
			return r.NS
		}
		goSide := func() float64 {
			return run(self, "-vdpa-bringup-child", path, "-vdpa-bringup-iters", fmt.Sprint(iters))
		}
		cSide := func() float64 { return run(*vdpaC, path, fmt.Sprint(iters)) }
		goSide()
		a, b := interleave(goSide, cSide)
		sa, sb := side("netctl", a, 1e-3, 2), side("c", b, 1e-3, 2)
		emit(Line{Bench: "vdpa_bringup_netctl_vs_c", Unit: "µs per vhost-vdpa bring-up (open to DRIVER_OK, reset, close) over VDUSE",
			A: sa, B: sb, Goal: "ratio at most 1.2", Meets: t(sa.Value/sb.Value <= 1.2),
			Details: map[string]any{"processes": "each side a process of its own (netctl's: vhostnet-bench -vdpa-bringup-child, package vdpa); the VDUSE device served by the parent"}})
	})
}

var (
	vdpaChild      = flag.String("vdpa-bringup-child", "", "(benchVDPASetup's child) bring up this /dev/vhost-vdpa-N -vdpa-bringup-iters times and print ns per bring-up")
	vdpaChildIters = flag.Int("vdpa-bringup-iters", 100, "bring-ups of -vdpa-bringup-child")
)

// vdpaBringUpChild is netctl's side of benchVDPASetup, in a process of
// its own: the calls vdpa_setup.c makes, through package vdpa.
func vdpaBringUpChild(path string, iters int) {
	mem, err := guest.NewMemory(4 << 20)
	if err != nil {
		fatal("%v", err)
	}
	defer mem.Close()
	q0, _ := guest.NewQueue(mem, guest.QueueConfig{})
	q1, _ := guest.NewQueue(mem, guest.QueueConfig{})
	kick, call := [2]int{q0.Kick, q1.Kick}, [2]int{q0.Call, q1.Call}
	t0 := time.Now()
	for range iters {
		vdpaBringUp(path, mem, kick, call)
	}
	fmt.Printf("{\"ns_per_setup\": %.0f, \"iterations\": %d}\n", float64(time.Since(t0).Nanoseconds())/float64(iters), iters)
}
