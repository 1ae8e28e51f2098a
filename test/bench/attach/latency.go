package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/test/bench/result"
	"github.com/netctl/netctl/test/l2"
)

// latencyRig runs the two attach programs against paused QEMUs.
type latencyRig struct {
	env     []string // netctl's environment: NETCTL_RUN_DIR in a throwaway directory
	backend string   // the backend netctl must choose here (userspace on the host, vhost-net in the VM)
	// steps collects netctl attach's own per-step times (NETCTL_STEP_TIMES)
	// under the side's name, when set.
	steps map[string]map[string][]float64
}

// stepTimesPrefix starts the line netctl attach prints on stderr under
// NETCTL_STEP_TIMES=1.
const stepTimesPrefix = "netctl attach: step times: "

// addSteps records the per-step times of one attach under side.
func (r *latencyRig) addSteps(side string, stderr []byte) error {
	for line := range strings.SplitSeq(string(stderr), "\n") {
		js, ok := strings.CutPrefix(line, stepTimesPrefix)
		if !ok {
			continue
		}
		var t struct {
			Steps []struct {
				Step string  `json:"step"`
				MS   float64 `json:"ms"`
			} `json:"steps"`
		}
		if err := json.Unmarshal([]byte(js), &t); err != nil {
			return fmt.Errorf("step times %q: %w", js, err)
		}
		if r.steps[side] == nil {
			r.steps[side] = map[string][]float64{}
		}
		for _, s := range t.Steps {
			r.steps[side][s.Step] = append(r.steps[side][s.Step], s.MS)
		}
		return nil
	}
	return fmt.Errorf("netctl attach printed no step times (NETCTL_STEP_TIMES=1): %.300s", stderr)
}

// netctlAttach runs `netctl attach --qmp SOCK --id ID --mac MAC --tap TAP
// --json` and returns its wall time, from the process's start to its
// exit. The attached NIC must be on r.backend.
func (r *latencyRig) netctlAttach(ctx context.Context, q *pausedQEMU, id, mac, tap string) (time.Duration, error) {
	return r.netctlAttachSide(ctx, "", q, id, mac, tap)
}

// netctlAttachSide is netctlAttach, its step times kept under side ("":
// not kept).
func (r *latencyRig) netctlAttachSide(ctx context.Context, side string, q *pausedQEMU, id, mac, tap string) (time.Duration, error) {
	args := []string{"attach", "--qmp", q.Sock, "--id", id, "--mac", mac, "--json"}
	if tap != "" {
		args = append(args, "--tap", tap)
	}
	cmd := exec.CommandContext(ctx, *netctlBin, args...)
	cmd.Env = r.env
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	t0 := time.Now()
	if side != "" {
		// The time netctl starts: its first steps are then what came
		// before Attach (exec, Go's runtime, package init, the command line).
		cmd.Env = append(cmd.Env[:len(cmd.Env):len(cmd.Env)], fmt.Sprintf("NETCTL_STEP_TIMES=%d", t0.UnixNano()))
	}
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
	if side != "" {
		if err := r.addSteps(side, stderr.Bytes()); err != nil {
			return 0, err
		}
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
	rig := &latencyRig{backend: "userspace", steps: map[string]map[string][]float64{}}
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
	// netctl's run directory on a tmpfs, as /run is where netctl runs
	// (its default, /run/netctl): the record's fsyncs cost there what
	// they cost in production, not what this machine's disk charges.
	runDir := filepath.Join(dir, "run")
	if err := os.MkdirAll(runDir, 0o700); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", runDir, "tmpfs", 0, "size=64m,mode=0700"); err != nil {
		return fmt.Errorf("tmpfs for netctl's run directory: %w", err)
	}
	defer unix.Unmount(runDir, unix.MNT_DETACH)
	rig.env = append(os.Environ(), "NETCTL_RUN_DIR="+runDir)

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
			d, err := rig.netctlAttachSide(ctx, "netctl", small, id, mac, "bnetctl")
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
			d, err := rig.netctlAttachSide(ctx, "crowded", crowded, id, mac, "bcrowd")
			if err == nil {
				err = rig.netctlDetach(ctx, crowded, id)
			}
			return d, err
		},
		"sparse": func() (time.Duration, error) {
			d, err := rig.netctlAttachSide(ctx, "sparse", sparse, id, mac, "bsparse")
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
	// A netctl process that does nothing (netctl version): what of an
	// attach is the process itself (exec, runtime and package init, exit).
	sides["version"] = func() (time.Duration, error) {
		cmd := exec.CommandContext(ctx, *netctlBin, "version")
		cmd.Env = rig.env
		t0 := time.Now()
		out, err := cmd.CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("netctl version: %w: %.300s", err, out)
		}
		return time.Since(t0), nil
	}
	// One untimed round first: the binaries' pages come in (over 9p in
	// the VM) and each QEMU's first hotplug is done.
	got := map[string][]float64{}
	for i := -1; i < *setupRounds; i++ {
		order := [][]string{{"netctl", "minimal"}, {"crowded", "sparse"}, {"probe", "version"}}
		if i%2 == 1 {
			order = [][]string{{"minimal", "netctl"}, {"sparse", "crowded"}, {"version", "probe"}}
		}
		if i == 0 {
			rig.steps = map[string]map[string][]float64{} // not the untimed round's
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
		"run_dir": "netctl's run directory (records, locks) on a tmpfs, as /run/netctl is",
		// The host probe every netctl attach runs (netctl probe: a
		// scratch tap and macvtap, qemu-system-x86_64 --version, ...),
		// timed alone in the same rounds.
		"netctl_probe_ms_median": result.Round(result.Median(got["probe"]), 3),
		// netctl version's wall time in the same rounds: the process
		// alone (exec, Go runtime and package init, exit).
		"netctl_version_ms_median": result.Round(result.Median(got["version"]), 3),
	}
	// Where an attach's time goes: each step's median (netctl attach's
	// own NETCTL_STEP_TIMES), and what is left of the wall time (the
	// process, the command line, the exit).
	for _, side := range []string{"netctl", "crowded", "sparse"} {
		var steps []map[string]any
		sum := 0.0
		for _, st := range stepOrder(rig.steps[side]) {
			m := result.Median(rig.steps[side][st])
			sum += m
			steps = append(steps, map[string]any{"step": st, "ms": result.Round(m, 3)})
		}
		steps = append(steps, map[string]any{"step": "the rest: the bench starting the process and reading its output, the JSON printed, the exit (the wall median less the steps')",
			"ms": result.Round(result.Median(got[side])-sum, 3)})
		details["netctl_steps_"+side] = steps
	}
	suffix := map[string]string{"userspace": "userspace", "vhost-net": "vhostnet"}[rig.backend]

	l := result.Line{
		Bench: "attach_latency_netctl_vs_minimal_" + suffix,
		Unit:  "ms per attach (process start to exit)",
		A:     result.NewSide("netctl_attach", got["netctl"], 1, 3),
		B:     result.NewSide("attach_c", got["minimal"], 1, 3),
		Goal:  "ratio at most 1.5",
	}
	l.B.Note = "test/bench/cattach/attach.c: open the tap" + map[bool]string{true: " and /dev/vhost-net", false: ""}[rig.backend == "vhost-net"] +
		", getfd, netdev_add, device_add over a raw QMP socket; no probe, checks or state"
	l.A.Note = "q35 with 4 root ports, no NIC attached; --tap an existing tap"
	l = result.Finish(l, *commit, *hostLoad)
	l.Meets = result.T(l.Ratio <= 1.5)
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

// stepOrder is the steps in the order netctl attach runs them (the order
// of their first appearance is not kept by a map: attach's own order).
func stepOrder(m map[string][]float64) []string {
	order := []string{"exec to main (the process, Go's runtime and package init)", "main to Attach (the command line)",
		"check the request, open the state, lock the VM", "connect to QEMU", "read QEMU", "check QEMU's process",
		"check the id, choose the bus", "record the intent", "decide (probe the host)", "open the backend", "record the backend",
		"getfd, netdev_add", "device_add, record", "close"}
	var out []string
	for _, s := range order {
		if _, ok := m[s]; ok {
			out = append(out, s)
		}
	}
	for s := range m {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
