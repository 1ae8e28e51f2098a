package libvirtd_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/state"
)

// started is a netctl run begun from the test goroutine (so that it runs
// in the test's namespaces), waited for anywhere.
type started struct {
	args []string
	cmd  *exec.Cmd
	out  bytes.Buffer
}

func (e *lvEnv) start(t *testing.T, args ...string) *started {
	t.Helper()
	s := &started{args: args, cmd: exec.CommandContext(e.ctx, e.bin, args...)}
	s.cmd.Env = append(os.Environ(), "NETCTL_RUN_DIR="+state.DefaultDir)
	s.cmd.Stdout, s.cmd.Stderr = &s.out, &s.out
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *started) wait() error {
	if err := s.cmd.Wait(); err != nil {
		return fmt.Errorf("netctl %s: %w\n%s", strings.Join(s.args, " "), err, s.out.String())
	}
	return nil
}

// TestHostLibvirtdAttachFailures: the failure paths of netctl attach and
// detach on a libvirt domain of the private libvirtd (netctl's hook
// installed), each ending with nothing left in libvirt (virsh domiflist),
// on the host (no nctl* link) or in the records:
//   - 8 parallel attaches (distinct ids) to one domain all succeed, then 8
//     parallel detaches;
//   - libvirtd restarted between attach and detach: detach still works;
//   - 100 attach/detach cycles;
//   - the domain destroyed while attaches run: each attach either
//     succeeded (and the hook's release deleted its tap and record) or
//     failed and undid itself.
func TestHostLibvirtdAttachFailures(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()
	e := newLvEnv(t, ctx)
	e.boot(t, "lvfail", false)

	// 8 parallel attaches, then 8 parallel detaches.
	start := time.Now()
	var runs []*started
	for i := range 8 {
		runs = append(runs, e.start(t, "attach", "--vm", "lvfail", "--id", fmt.Sprintf("p%d", i)))
	}
	for _, r := range runs {
		if err := r.wait(); err != nil {
			t.Error(err)
		}
	}
	t.Logf("8 parallel attaches: %v", time.Since(start).Round(time.Millisecond))
	if got := lvTaps(); len(got) != 8 || len(lvRecords()) != 8 {
		t.Errorf("after 8 attaches: taps %v, records %v", got, lvRecords())
	}
	if out, err := e.d.Virsh("domiflist", "lvfail"); err != nil || strings.Count(out, "nctl") != 8 {
		t.Errorf("virsh domiflist after 8 attaches: %v\n%s", err, out)
	}
	start = time.Now()
	runs = runs[:0]
	for i := range 8 {
		runs = append(runs, e.start(t, "detach", "--vm", "lvfail", "--id", fmt.Sprintf("p%d", i)))
	}
	for _, r := range runs {
		if err := r.wait(); err != nil {
			t.Error(err)
		}
	}
	t.Logf("8 parallel detaches: %v", time.Since(start).Round(time.Millisecond))
	e.nothingLeft(t, "after 8 parallel detaches", "lvfail")

	// libvirtd restarted between attach and detach.
	nic := e.attach(t, "--vm", "lvfail", "--id", "rs1")
	if err := e.d.RestartLibvirtd(ctx); err != nil {
		t.Fatal(err)
	}
	if out, err := e.d.Virsh("domiflist", "lvfail"); err != nil || !strings.Contains(out, nic.Tap.Name) {
		t.Errorf("virsh domiflist after the restart: %v\n%s", err, out)
	}
	if out, err := e.netctl("detach", "--vm", "lvfail", "--id", "rs1"); err != nil {
		t.Errorf("netctl detach after libvirtd restarted: %v\n%s", err, out)
	}
	e.nothingLeft(t, "after detach across a libvirtd restart", "lvfail")

	// 100 cycles.
	const cycles = 100
	start = time.Now()
	var slowest, inAttach time.Duration
	for i := range cycles {
		c := time.Now()
		if out, err := e.netctl("attach", "--vm", "lvfail", "--id", "cy"); err != nil {
			t.Fatalf("cycle %d: attach: %v\n%s", i, err, out)
		}
		inAttach += time.Since(c)
		if out, err := e.netctl("detach", "--vm", "lvfail", "--id", "cy"); err != nil {
			t.Fatalf("cycle %d: detach: %v\n%s", i, err, out)
		}
		slowest = max(slowest, time.Since(c))
	}
	took := time.Since(start)
	t.Logf("%d attach/detach cycles: %v (%v a cycle: attach %v, detach %v; slowest cycle %v)", cycles, took.Round(time.Millisecond),
		(took / cycles).Round(time.Millisecond), (inAttach / cycles).Round(time.Millisecond), ((took - inAttach) / cycles).Round(time.Millisecond), slowest.Round(time.Millisecond))
	e.nothingLeft(t, fmt.Sprintf("after %d cycles", cycles), "lvfail")

	// Destroyed while attaches run, one NIC attached before them: the
	// release takes each NIC's own lock, so the in-flight attaches (whose
	// hotplug waits for the destroy's job) do not keep it from deleting
	// the attached one (with one lock per domain it gave up on all and
	// left the attached NIC's tap and record).
	if out, err := e.netctl("attach", "--vm", "lvfail", "--id", "pre"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	runs = runs[:0]
	for i := range 4 {
		runs = append(runs, e.start(t, "attach", "--vm", "lvfail", "--id", fmt.Sprintf("d%d", i)))
	}
	for len(lvRecords()) <= 1 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	if out, err := e.d.Virsh("destroy", "lvfail"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	ok := 0
	for _, r := range runs {
		if err := r.wait(); err != nil {
			t.Logf("attach during destroy: %v", err)
		} else {
			ok++
		}
	}
	t.Logf("%d of %d attaches succeeded before the destroy", ok, len(runs))
	// An attach blocked in libvirt while the release hook waited for its
	// lock undoes itself when libvirt answers: give it a moment.
	deadline := time.Now().Add(30 * time.Second)
	for (len(lvTaps()) > 0 || len(lvRecords()) > 0) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	e.nothingLeft(t, "after destroy during attaches", "")
	t.Logf("netctl's log:\n%s", readFile("/var/log/netctl/hook.log"))
}
