package attach

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestPreflightRefusesTwice: two NICs of one incoming manifest that name
// the same MAC, slot, tap or vdpa device are refused before QEMU is even
// asked (the socket here serves nothing).
func TestPreflightRefusesTwice(t *testing.T) {
	sock := t.TempDir() + "/none.sock"
	for name, c := range map[string][2]Request{
		"mac":  {{ID: "a", MAC: "52:54:00:00:00:01"}, {ID: "b", MAC: "52:54:00:00:00:01"}},
		"slot": {{ID: "a", Addr: "0x4"}, {ID: "b", Addr: "0x4.0"}},
		"tap":  {{ID: "a", Tap: "t0"}, {ID: "b", Tap: "t0"}},
		"vdpa": {{ID: "a", VDPA: "vdpa0"}, {ID: "b", VDPA: "vdpa0"}},
	} {
		rs := []Request{c[0], c[1]}
		for i := range rs {
			rs[i].QMP, rs[i].StateDir = sock, t.TempDir()
			if rs[i].MAC == "" {
				rs[i].MAC = "52:54:00:00:00:1" + string(rune('0'+i))
			}
		}
		err := Preflight(context.Background(), rs)
		if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "the same") {
			t.Errorf("%s twice: %v", name, err)
		}
	}
}

// TestPreflightRefusesAVDPANameInUse: a NIC that attach would give a
// vdpa device created on its management device, whose name (netctl's for
// that id) is taken on this host (the source's own, on one host), is
// refused before QEMU is asked: attach would refuse it only after the
// NICs before it were added.
func TestPreflightRefusesAVDPANameInUse(t *testing.T) {
	h := newFakeHost(t, "probe-6.12-vdpa.json")
	h.vdpas["netctl-net2"] = true
	rs := []Request{{ID: "net1", MAC: "52:54:00:00:00:01"}, {ID: "net2", MAC: "52:54:00:00:00:02", Mgmtdev: "vdpasim_net"}}
	for i := range rs {
		rs[i].QMP, rs[i].StateDir, rs[i].Host = t.TempDir()+"/none.sock", t.TempDir(), h
	}
	rs[1].QMP = rs[0].QMP
	err := Preflight(context.Background(), rs)
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "netctl-net2") {
		t.Errorf("a vdpa name in use: %v", err)
	}
}

// TestPreflightRefusesTwoNICsOnOneRootPort: a pcie-root-port takes one
// device, so two NICs of one manifest on the same free port (no addr, or
// addr 0x0: its one slot) would pass each alone, and the second would
// fail its device_add after the first was added to a QEMU that cannot
// unplug it: refused before anything is added.
func TestPreflightRefusesTwoNICsOnOneRootPort(t *testing.T) {
	q := newFakeQEMU(t)
	q.mu.Lock() // the fake's server goroutine reads them under its lock
	q.machine, q.rootPorts = "pc-q35-7.2-machine", []string{"rp1", "rp2"}
	q.mu.Unlock()
	h := newFakeHost(t, "probe-6.12.json")
	dir := t.TempDir()
	req := func(id, mac, bus, addr string) Request {
		return Request{QMP: q.sock, StateDir: dir, Host: h, ID: id, MAC: mac, Bus: bus, Addr: addr, Backend: "userspace"}
	}
	// Each on a port of its own: fine (what the test below changes).
	if err := Preflight(context.Background(), []Request{req("a", "52:54:00:00:00:01", "rp1", ""), req("b", "52:54:00:00:00:02", "rp2", "")}); err != nil {
		t.Fatalf("two NICs on two free ports: %v", err)
	}
	for name, rs := range map[string][]Request{
		"no addr":      {req("a", "52:54:00:00:00:01", "rp1", ""), req("b", "52:54:00:00:00:02", "rp1", "")},
		"addr 0x0 too": {req("a", "52:54:00:00:00:01", "rp1", "0x0"), req("b", "52:54:00:00:00:02", "rp1", "")},
	} {
		err := Preflight(context.Background(), rs)
		if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "rp1") {
			t.Errorf("%s: two NICs on root port rp1: %v", name, err)
		}
	}
}
