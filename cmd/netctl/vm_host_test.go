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
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/qemuproc"
	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/test/qemutest"
)

// TestHostVMList runs two real QEMUs, one with two -qmp monitors (the
// first held by this test, as another client would) and one whose only
// monitor is libvirt-like (fd=3, inherited), and checks what
// netctl vm list --json and the table say about each monitor.
func TestHostVMList(t *testing.T) {
	testenv.Host(t)
	dir := t.TempDir()
	start := func(extra []*os.File, args ...string) *exec.Cmd {
		return qemutest.Start(t, "", extra, append([]string{"-m", "32"}, args...)...)
	}
	web, lvName := fmt.Sprintf("nctl-vmlist-%d", os.Getpid()), fmt.Sprintf("nctl-vmlist-lv-%d", os.Getpid())
	s1, s2 := filepath.Join(dir, "q1.sock"), filepath.Join(dir, "q2.sock")
	a := start(nil, "-name", "guest="+web+",debug-threads=on",
		"-qmp", "unix:"+s1+",server=on,wait=off", "-qmp", "unix:"+s2+",server=on,wait=off")
	f := qemutest.ListenerFile(t, filepath.Join(dir, "lv.sock"))
	lv := start([]*os.File{f}, "-name", "guest="+lvName+",debug-threads=on",
		"-chardev", "socket,id=charmonitor,fd=3,server=on,wait=off", "-mon", "chardev=charmonitor,id=monitor,mode=control")
	f.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var held *qmp.Client
	var err error
	for held == nil {
		if held, err = qmp.Dial(ctx, s1); err != nil && ctx.Err() != nil {
			t.Fatalf("QEMU's %s never answered: %v", s1, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	defer held.Close()
	for {
		if _, err := os.Stat(s2); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}

	var stdout, stderr bytes.Buffer
	if code := runMain([]string{"netctl", "vm", "list", "--json", web, lvName}, &stdout, &stderr); code != 0 {
		t.Fatalf("vm list --json: exit %d: %s", code, stderr.String())
	}
	var got struct {
		VMs []struct {
			PID       int    `json:"pid"`
			Name      string `json:"name"`
			StartTime uint64 `json:"starttime"`
			Monitors  []struct {
				Socket  string         `json:"socket"`
				FD      string         `json:"fd"`
				Libvirt bool           `json:"libvirt"`
				State   qemuproc.State `json:"state"`
				Detail  string         `json:"detail"`
			} `json:"monitors"`
		} `json:"vms"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, stdout.String())
	}
	if len(got.VMs) != 2 {
		t.Fatalf("listed %d VMs: %s", len(got.VMs), stdout.String())
	}
	w, l := got.VMs[0], got.VMs[1]
	if w.PID != a.Process.Pid || w.Name != web || w.StartTime == 0 || len(w.Monitors) != 2 {
		t.Fatalf("web VM: %+v", w)
	}
	if m := w.Monitors[0]; m.Socket != s1 || m.State != qemuproc.StateBusy || !strings.Contains(m.Detail, fmt.Sprintf("this process (pid %d)", os.Getpid())) {
		t.Errorf("held monitor: %+v", m)
	}
	if m := w.Monitors[1]; m.Socket != s2 || m.State != qemuproc.StateReachable {
		t.Errorf("free monitor: %+v", m)
	}
	if l.PID != lv.Process.Pid || l.Name != lvName || len(l.Monitors) != 1 {
		t.Fatalf("libvirt-like VM: %+v", l)
	}
	if m := l.Monitors[0]; m.State != qemuproc.StateLibvirt || !m.Libvirt || m.FD != "3" {
		t.Errorf("libvirt monitor: %+v", m)
	}

	stdout.Reset()
	if code := runMain([]string{"netctl", "vm", "list", web, lvName}, &stdout, &stderr); code != 0 {
		t.Fatalf("vm list: exit %d: %s", code, stderr.String())
	}
	table := stdout.String()
	lines := strings.Split(strings.TrimSpace(table), "\n")
	want := [][]string{
		{"PID", "NAME", "MONITOR", "STATE"},
		{fmt.Sprint(a.Process.Pid), web, s1, "busy:", "in", "use", "by", "this", "process"},
		{fmt.Sprint(a.Process.Pid), web, s2, "reachable"},
		{fmt.Sprint(lv.Process.Pid), lvName, "fd", "3", "(-mon", "chardev", "charmonitor)", "libvirt:", "libvirtd", "holds", "it:", "attach", "through", "libvirt"},
	}
	if len(lines) != len(want) {
		t.Fatalf("table has %d lines, want %d:\n%s", len(lines), len(want), table)
	}
	for i, w := range want {
		if f := strings.Fields(lines[i]); len(f) < len(w) || !slices.Equal(f[:len(w)], w) {
			t.Errorf("line %d = %q, want it to start %q", i, lines[i], w)
		}
	}
	t.Logf("netctl vm list:\n%s", table)
}
