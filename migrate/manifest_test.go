package migrate

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/virtio"
)

// sample is a manifest as TestVMMigrateVhostNet's source exported it.
func sample() *Manifest {
	return &Manifest{Schema: Schema, VM: "", QEMUVersion: "7.2.22", Machine: "pc-i440fx-7.2-machine", NICs: []NIC{{
		ID: "net1", MAC: "52:54:00:22:00:02", Queues: 1, Backend: "vhost-net", Profile: "throughput", Addr: "0x2",
		Offered: []string{"CSUM", "GUEST_CSUM", "GUEST_TSO4", "GUEST_TSO6", "GUEST_ECN", "GUEST_UFO", "HOST_TSO4", "HOST_TSO6", "HOST_ECN",
			"HOST_UFO", "MRG_RXBUF", "INDIRECT_DESC", "EVENT_IDX", "VERSION_1", "RING_RESET"},
		Negotiated: []string{"CSUM", "GUEST_CSUM", "CTRL_GUEST_OFFLOADS", "MAC", "GUEST_TSO4", "MRG_RXBUF", "STATUS", "CTRL_VQ",
			"VERSION_1", "RING_RESET"},
	}}}
}

func TestParseRoundTrip(t *testing.T) {
	b, _ := json.Marshal(sample())
	m, err := Parse(b)
	if err != nil || len(m.NICs) != 1 || m.NICs[0].Addr != "0x2" {
		t.Fatalf("%+v %v", m, err)
	}
}

func TestParseRefuses(t *testing.T) {
	edit := func(f func(*Manifest)) []byte {
		m := sample()
		f(m)
		b, _ := json.Marshal(m)
		return b
	}
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "not a manifest"},
		{"unknown field", []byte(`{"schema":1,"nics":[],"x":1}`), "unknown field"},
		{"schema", edit(func(m *Manifest) { m.Schema = 9 }), "schema 9"},
		{"no nics", edit(func(m *Manifest) { m.NICs = nil }), "0 NICs"},
		{"bad id", edit(func(m *Manifest) { m.NICs[0].ID = "1 x" }), "NIC 0"},
		{"twice", edit(func(m *Manifest) { m.NICs = append(m.NICs, m.NICs[0]) }), "twice"},
		{"bad feature", edit(func(m *Manifest) { m.NICs[0].Negotiated = append(m.NICs[0].Negotiated, "WARP") }), "no virtio feature"},
		{"never offered", edit(func(m *Manifest) { m.NICs[0].Negotiated = append(m.NICs[0].Negotiated, "HOST_USO") }), "never offered"},
		{"queues", edit(func(m *Manifest) { m.NICs[0].Queues = 0 }), "out of range"},
		{"huge", make([]byte, MaxManifest+1), "more than"},
		// export never writes it: joining a tap another VM holds is this
		// host's operator's word (netctl attach --shared-tap), not a file's.
		{"shared tap", []byte(strings.Replace(string(edit(func(m *Manifest) { m.NICs[0].Tap = "vm2tap" })), `"tap":"vm2tap"`, `"tap":"vm2tap","shared_tap":true`, 1)), "shared_tap"},
	} {
		if _, err := Parse(c.b); !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// TestIncomingPinsToTheSource: the destination's NIC is pinned to what the
// source offered, must offer what the guest negotiated (only the bits
// netctl decides), and a plan that leaves out a negotiated bit is refused
// before anything is created: the guest would carry it into the pool.
func TestIncomingPinsToTheSource(t *testing.T) {
	m := sample()
	req, err := attachRequest(IncomingRequest{}, "/run/q.sock", "vm", m.NICs[0])
	if err != nil {
		t.Fatal(err)
	}
	if req.Addr != "0x2" || req.MAC != m.NICs[0].MAC || req.Pool == nil || !req.Pool.Offer.Has(virtio.RingReset) {
		t.Errorf("request %+v pool %+v", req, req.Pool)
	}
	if req.Require.Has(virtio.NetCtrlVQ) || !req.Require.Has(virtio.RingReset|virtio.NetGuestTSO4) {
		t.Errorf("require %v", req.Require)
	}
	// Under a plan the NIC's record names the plan (netctl list, diagnose
	// --plan), not a set of its own.
	full := &policy.Pool{ID: "fs-plan", Offer: policy.Managed(), Hosts: []string{"a", "b"}}
	if r, err := attachRequest(IncomingRequest{Pool: full}, "/run/q.sock", "vm", m.NICs[0]); err != nil || r.Pool.ID != "fs-plan" || r.Pool.Offer != req.Pool.Offer {
		t.Errorf("under plan fs-plan: pool %+v, %v", r.Pool, err)
	}
	pool := &policy.Pool{ID: "fs-1", Offer: req.Pool.Offer &^ virtio.RingReset, Hosts: []string{"a", "b"}}
	_, err = attachRequest(IncomingRequest{Pool: pool}, "/run/q.sock", "vm", m.NICs[0])
	if !errors.Is(err, errs.ErrNotSupported) || !strings.Contains(err.Error(), "RING_RESET") {
		t.Errorf("a plan without a negotiated bit: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	b, _ := json.Marshal(sample())
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Parse(b)
		if err != nil {
			if !errors.Is(err, errs.ErrInvalid) {
				t.Fatalf("error without ErrInvalid: %v", err)
			}
			return
		}
		for _, n := range m.NICs {
			if _, err := attachRequest(IncomingRequest{}, "/s", "vm", n); err != nil {
				t.Fatalf("a parsed NIC does not make a request: %v", err)
			}
		}
	})
}
