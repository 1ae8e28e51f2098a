package state

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func sample() *NIC {
	return &NIC{Schema: Schema, VM: "web1", QEMUPID: 4242, QEMUStart: 123456, QMP: "/run/web1.qmp", ID: "net1", Netdev: "netctl-net1",
		QEMUVersion: "7.2.22", Machine: "pc-i440fx-7.2-machine", Backend: "vhost-net", Queues: 2, MAC: "52:54:00:12:34:56",
		Tap: &Link{Name: "nctl0", Ifindex: 7, Created: true}, FDNames: []string{"netctl-net1-tap0", "netctl-net1-tap1", "netctl-net1-vhost0", "netctl-net1-vhost1"},
		Features: []string{"CSUM", "GUEST_CSUM", "MQ"}, Properties: map[string]string{"mq": "on", "vectors": "6"},
		Steps:  []Step{{"vdpa", false, "no vdpa"}, {"vhost-net", true, "/dev/vhost-net opens"}},
		Status: StatusAttached, Attached: time.Date(2026, 12, 1, 5, 0, 0, 0, time.UTC)}
}

func TestSaveLoadListRemove(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	n := sample()
	if err := s.Save(n); err != nil {
		t.Fatal(err)
	}
	key := KeyFor(n.VM, n.QMP)
	got, err := s.Load(key, "net1")
	if err != nil || got.MAC != n.MAC || got.Tap.Name != "nctl0" || len(got.Steps) != 2 {
		t.Fatalf("load: %+v %v", got, err)
	}
	n2 := sample()
	n2.VM, n2.ID = "", "net2"
	if err := s.Save(n2); err != nil {
		t.Fatal(err)
	}
	all, bad, err := s.List("")
	if err != nil || len(bad) != 0 || len(all) != 2 {
		t.Fatalf("list: %d %v %v", len(all), bad, err)
	}
	one, _, _ := s.List(VMKey("web1"))
	if len(one) != 1 || one[0].ID != "net1" {
		t.Errorf("list web1: %+v", one)
	}
	// A bad file is reported by name and the others still listed.
	bp := filepath.Join(s.Dir, "nics", "web1.broken.json")
	os.WriteFile(bp, []byte(`{"schema":"netctl.nic/v1","vm":"web1"`), 0o600)
	all, bad, _ = s.List("")
	if len(all) != 2 || len(bad) != 1 || !strings.Contains(bad[0].Error(), bp) {
		t.Errorf("list with a broken file: %d records, bad %v", len(all), bad)
	}
	os.Remove(bp)
	if err := s.Remove(key, "net1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(key, "net1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("load after remove: %v", err)
	}
	if err := s.Remove(key, "net1"); err != nil {
		t.Errorf("remove twice: %v", err)
	}
	es, _ := os.ReadDir(filepath.Join(s.Dir, "nics"))
	for _, e := range es {
		if strings.HasPrefix(e.Name(), ".tmp") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}

func TestSaveRefusesInvalid(t *testing.T) {
	s, _ := Open(t.TempDir())
	for _, mod := range []func(*NIC){
		func(n *NIC) { n.ID = "../x" },
		func(n *NIC) { n.MAC = "zz" },
		func(n *NIC) { n.Queues = 0 },
		func(n *NIC) { n.Backend = "dpdk" },
		func(n *NIC) { n.Status = "odd" },
		func(n *NIC) { n.Tap.Name = "a/b" },
		func(n *NIC) { n.VM = "a\nb" },
		func(n *NIC) { n.Schema = "v0" },
	} {
		n := sample()
		mod(n)
		if err := s.Save(n); !errors.Is(err, ErrInvalid) {
			t.Errorf("save %+v: %v", n, err)
		}
	}
}

func TestKeyOfVM(t *testing.T) {
	for name, want := range map[string]string{"web1": "web1", "a.b_c-d": "a.b_c-d"} {
		if got := VMKey(name); got != want {
			t.Errorf("VMKey(%q) = %q", name, got)
		}
	}
	for _, name := range []string{"../etc", "a/b", ".hidden", "with space", strings.Repeat("x", 100)} {
		k := VMKey(name)
		if strings.ContainsAny(k, "/ ") || strings.HasPrefix(k, ".") || len(k) > 40 || k == VMKey(name+"1") {
			t.Errorf("VMKey(%q) = %q", name, k)
		}
	}
	if KeyFor("", "/a.sock") == KeyFor("", "/b.sock") || KeyFor("", "/a.sock") != KeyFor("", "/x/../a.sock") {
		t.Error("socket keys")
	}
}

// TestLockSerialises: two holders of one VM's lock never overlap; another
// VM's lock is free meanwhile; a waiter gives up with its context.
func TestLockSerialises(t *testing.T) {
	s, _ := Open(t.TempDir())
	ctx := context.Background()
	var mu sync.Mutex
	inside, maxInside := 0, 0
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := s.Lock(ctx, "vm1")
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			inside++
			maxInside = max(maxInside, inside)
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
			mu.Lock()
			inside--
			mu.Unlock()
			l.Unlock()
		}()
	}
	wg.Wait()
	if maxInside != 1 {
		t.Errorf("%d holders at once", maxInside)
	}
	l1, _ := s.Lock(ctx, "vm1")
	defer l1.Unlock()
	l2, err := s.Lock(ctx, "vm2")
	if err != nil {
		t.Fatalf("another VM's lock: %v", err)
	}
	l2.Unlock()
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := s.Lock(tctx, "vm1"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting for a held lock: %v", err)
	}
}

func TestParseStartTime(t *testing.T) {
	b, err := os.ReadFile("testdata/proc-stat-qemu.txt")
	if err != nil {
		t.Fatal(err)
	}
	if v, err := ParseStartTime(b); err != nil || v != 1063655 {
		t.Errorf("start time %d, %v", v, err)
	}
	if _, err := ProcStartTime(os.Getpid()); err != nil {
		t.Errorf("own start time: %v", err)
	}
	if !SameProcess(os.Getpid(), must(ProcStartTime(os.Getpid()))) || SameProcess(os.Getpid(), 1) {
		t.Error("SameProcess")
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestSameProcessZombie: a child that exited but is not reaped yet (a
// zombie: its /proc entry and start time stay) is not the same process
// any more.
func TestSameProcessZombie(t *testing.T) {
	cmd := exec.Command("/bin/true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	start, err := ProcStartTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatal(err)
		}
		if st, _, _ := parseStat(b); st == 'Z' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("child %d never became a zombie: %s", pid, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got, err := ProcStartTime(pid); err != nil || got != start {
		t.Errorf("a zombie's start time %d, %v (want %d: it stays)", got, err, start)
	}
	if SameProcess(pid, start) {
		t.Error("a zombie counts as the running process")
	}
	cmd.Wait()
	if SameProcess(pid, start) {
		t.Error("a reaped process counts as running")
	}
}
