package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/test/bench/result"
	"github.com/netctl/netctl/test/l2"
)

// latencyRig runs the two attach programs against paused QEMUs.
type latencyRig struct {
	env     []string // netctl's environment: NETCTL_RUN_DIR in a throwaway directory
	backend string   // the backend netctl must choose here (userspace on the host, vhost-net in the VM)
}

// netctlAttach runs `netctl attach --qmp SOCK --id ID --mac MAC --tap TAP
// --json` and returns its wall time, from the process's start to its
// exit. The attached NIC must be on r.backend.
func (r *latencyRig) netctlAttach(ctx context.Context, q *pausedQEMU, id, mac, tap string) (time.Duration, error) {
	args := []string{"attach", "--qmp", q.Sock, "--id", id, "--mac", mac, "--json"}
	if tap != "" {
		args = append(args, "--tap", tap)
	}
	cmd := exec.CommandContext(ctx, *netctlBin, args...)
	cmd.Env = r.env
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	t0 := time.Now()
	err := cmd.Run()
	took := time.Since(t0)
	if err != nil {
		return 0, fmt.Errorf("netctl %v: %w: %s", args, err, stderr.Bytes())
	}
	var nic struct {
		Backend string `json:"backend"`
	}
	if err := json.Unmarshal(out.Bytes(), &nic); err != nil {
		return 0, fmt.Errorf("netctl attach --json printed %.200q: %w", out.Bytes(), err)
	}
	if nic.Backend != r.backend {
		return 0, fmt.Errorf("netctl attach chose %q here, the benchmark is of %q", nic.Backend, r.backend)
	}
	return took, nil
}

func (r *latencyRig) netctlDetach(ctx context.Context, q *pausedQEMU, id string) error {
	cmd := exec.CommandContext(ctx, *netctlBin, "detach", "--qmp", q.Sock, "--id", id)
	cmd.Env = r.env
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("netctl detach --id %s: %w: %s", id, err, out)
	}
	return nil
}

// minimalAttach runs attach-c and returns its wall time.
func (r *latencyRig) minimalAttach(ctx context.Context, q *pausedQEMU, id, mac, tap, bus string) (time.Duration, error) {
	cmd := exec.CommandContext(ctx, *attachC, q.Sock, tap, id, mac, bus, r.backend)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	t0 := time.Now()
	err := cmd.Run()
	took := time.Since(t0)
	if err != nil {
		return 0, fmt.Errorf("%s: %w: %s", *attachC, err, stderr.Bytes())
	}
	return took, nil
}

// benchLatency: netctl attach vs attach-c on a q35 VM with a few free root
// ports and no NIC; netctl attach into a VM with 64 NICs vs one with 1
// (both with the same number of root ports). Each timed attach is
// undone, untimed, before the next.
func benchLatency() error {
	if *netctlBin == "" || *attachC == "" {
		return fmt.Errorf("-netctl and -attach-c are needed")
	}
	ctx := context.Background()
	rig := &latencyRig{backend: "userspace"}
	if _, err := os.Stat("/dev/vhost-net"); err == nil {
		rig.backend = "vhost-net"
	}
	where := "host"
	dir, err := os.MkdirTemp("", "attach-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	qdir := dir // QEMU's view of the work directory
	if *root != "" {
		where = "6.12 test VM (QEMU through chroot " + *root + ")"
		if err := l2.Chroot(); err != nil {
			return err
		}
		qdir = l2.Run + "/attach-bench"
		if err := os.MkdirAll(*root+qdir, 0o755); err != nil {
			return err
		}
	}
	rig.env = append(os.Environ(), "NETCTL_RUN_DIR="+filepath.Join(dir, "run"))

	// The taps the timed attaches open: persistent, one queue, vnet_hdr.
	for _, name := range []string{"bnetctl", "bmin", "bcrowd", "bsparse"} {
		t, err := macvtap.CreateTap(macvtap.TapConfig{Name: name, VnetHdr: true, Persistent: true})
		if err != nil {
			return fmt.Errorf("tap %s: %w", name, err)
		}
		t.Close()
		defer func() {
			if t, err := macvtap.CreateTap(macvtap.TapConfig{Name: name, VnetHdr: true}); err == nil {
				t.Delete()
			}
		}()
	}

	ports := *preload + 8
	small, err := startQEMU(ctx, *root, qdir, "bench-small", 4)
	if err != nil {
		return err
	}
	defer small.Close()
	crowded, err := startQEMU(ctx, *root, qdir, "bench-crowded", ports)
	if err != nil {
		return err
	}
	defer crowded.Close()
	sparse, err := startQEMU(ctx, *root, qdir, "bench-sparse", ports)
	if err != nil {
		return err
	}
	defer sparse.Close()

	t0 := time.Now()
	for i := 0; i < *preload; i++ {
		if _, err := rig.netctlAttach(ctx, crowded, fmt.Sprintf("pre%d", i), fmt.Sprintf("52:54:00:be:10:%02x", i), ""); err != nil {
			return fmt.Errorf("preload NIC %d: %w", i, err)
		}
	}
	if _, err := rig.netctlAttach(ctx, sparse, "pre0", "52:54:00:be:20:00", ""); err != nil {
		return fmt.Errorf("preload: %w", err)
	}
	logf("latency (%s, %s): %d NICs attached to bench-crowded, 1 to bench-sparse in %v", where, rig.backend, *preload, time.Since(t0).Round(time.Millisecond))

	const id, mac = "bn", "52:54:00:be:00:01"
	sides := map[string]func() (time.Duration, error){
		"netctl": func() (time.Duration, error) {
			d, err := rig.netctlAttach(ctx, small, id, mac, "bnetctl")
			if err == nil {
				err = rig.netctlDetach(ctx, small, id)
			}
			return d, err
		},
		"minimal": func() (time.Duration, error) {
			// The last root port: netctl takes the first free one.
			d, err := rig.minimalAttach(ctx, small, id, mac, "bmin", small.Ports[len(small.Ports)-1])
			if err == nil {
				err = small.unplug(ctx, id, "nd-"+id)
			}
			return d, err
		},
		"crowded": func() (time.Duration, error) {
			d, err := rig.netctlAttach(ctx, crowded, id, mac, "bcrowd")
			if err == nil {
				err = rig.netctlDetach(ctx, crowded, id)
			}
			return d, err
		},
		"sparse": func() (time.Duration, error) {
			d, err := rig.netctlAttach(ctx, sparse, id, mac, "bsparse")
			if err == nil {
				err = rig.netctlDetach(ctx, sparse, id)
			}
			return d, err
		},
	}
	// netctl probe alone (the host probe every attach runs), to show
	// what part of an attach it is.
	sides["probe"] = func() (time.Duration, error) {
		cmd := exec.CommandContext(ctx, *netctlBin, "probe", "--json")
		cmd.Env = rig.env
		t0 := time.Now()
		out, err := cmd.CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("netctl probe: %w: %.300s", err, out)
		}
		return time.Since(t0), nil
	}
	// One untimed round first: the binaries' pages come in (over 9p in
	// the VM) and each QEMU's first hotplug is done.
	got := map[string][]float64{}
	for i := -1; i < *setupRounds; i++ {
		order := [][]string{{"netctl", "minimal"}, {"crowded", "sparse"}, {"probe"}}
		if i%2 == 1 {
			order = [][]string{{"minimal", "netctl"}, {"sparse", "crowded"}, {"probe"}}
		}
		for _, pair := range order {
			for _, s := range pair {
				d, err := sides[s]()
				if err != nil {
					return fmt.Errorf("round %d, %s: %w", i, s, err)
				}
				if i >= 0 {
					got[s] = append(got[s], float64(d)/1e6)
				}
			}
		}
	}
	// Nothing of the timed attaches may be left in QEMU.
	for _, q := range []*pausedQEMU{small, crowded, sparse} {
		ids, err := q.devices(ctx)
		if err != nil {
			return err
		}
		if ids[id] {
			return fmt.Errorf("QEMU %s still has device %s after the rounds", q.Name, id)
		}
	}

	var ver struct {
		QEMU struct{ Major, Minor, Micro int } `json:"qemu"`
	}
	small.ctl.Run(ctx, "query-version", nil, &ver)
	details := map[string]any{
		"where":   where,
		"backend": rig.backend,
		"qemu":    fmt.Sprintf("%d.%d.%d", ver.QEMU.Major, ver.QEMU.Minor, ver.QEMU.Micro),
		"vm":      "q35, paused (-S), no guest, native PCIe hotplug into pcie-root-ports",
		"timed":   "wall time of the attach process, start to exit; the NIC is removed (untimed) before the next round",
		// The host probe every netctl attach runs (netctl probe: a
		// scratch tap and macvtap, qemu-system-x86_64 --version, ...),
		// timed alone in the same rounds.
		"netctl_probe_ms_median": result.Round(result.Median(got["probe"]), 3),
	}
	suffix := map[string]string{"userspace": "userspace", "vhost-net": "vhostnet"}[rig.backend]

	l := result.Line{
		Bench: "attach_latency_netctl_vs_minimal_" + suffix,
		Unit:  "ms per attach (process start to exit)",
		A:     result.NewSide("netctl_attach", got["netctl"], 1, 3),
		B:     result.NewSide("attach_c", got["minimal"], 1, 3),
		Goal:  "ratio at most 1.1",
	}
	l.B.Note = "test/bench/cattach/attach.c: open the tap" + map[bool]string{true: " and /dev/vhost-net", false: ""}[rig.backend == "vhost-net"] +
		", getfd, netdev_add, device_add over a raw QMP socket; no probe, checks or state"
	l.A.Note = "q35 with 4 root ports, no NIC attached; --tap an existing tap"
	l = result.Finish(l, *commit, *hostLoad)
	l.Meets = result.T(l.Ratio <= 1.1)
	l.Details = details
	result.Print(l)

	l = result.Line{
		Bench: fmt.Sprintf("attach_latency_%d_vs_1_attached_%s", *preload, suffix),
		Unit:  "ms per netctl attach (process start to exit)",
		A:     result.NewSide(fmt.Sprintf("with_%d_attached", *preload), got["crowded"], 1, 3),
		B:     result.NewSide("with_1_attached", got["sparse"], 1, 3),
		Goal:  "ratio at most 1.2",
	}
	l.A.Note = fmt.Sprintf("q35 with %d root ports; the %d NICs attached by netctl (records in its run directory)", ports, *preload)
	l.B.Note = fmt.Sprintf("q35 with %d root ports", ports)
	l = result.Finish(l, *commit, *hostLoad)
	l.Meets = result.T(l.Ratio <= 1.2)
	l.Details = details
	result.Print(l)
	return nil
}
