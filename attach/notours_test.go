package attach

import (
	"strings"
	"testing"

	"github.com/netctl/netctl/state"
)

// TestCleanupLeavesLinksNotNetctls: records on disk are outside input. A
// record edited to say netctl created eth0 (with eth0's real ifindex), or
// a tap nctl5 with no ifindex (which DeleteLink takes as "any link of
// that name"), or a vdpa device netctl would never have named, must not
// make gc or detach delete that link or device: netctl creates only taps
// nctlN and macvtaps nctlmvN, records their ifindex, and names its vdpa
// devices netctl-ID. Before the fix gc deleted eth0, nctl5 and the vdpa
// device, and detach deleted eth0.
func TestCleanupLeavesLinksNotNetctls(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(n *state.NIC)
		keep string // the link or vdpa device that must stay
	}{
		{"eth0", func(n *state.NIC) { n.Tap = &state.Link{Name: "eth0", Ifindex: 2, Created: true} }, "link eth0"},
		{"macvtap-eth0", func(n *state.NIC) { n.Tap, n.Macvtap = nil, &state.Link{Name: "eth0", Ifindex: 2, Created: true} }, "link eth0"},
		{"no-ifindex", func(n *state.NIC) { n.Tap = &state.Link{Name: "nctl5", Created: true} }, "link nctl5"},
		{"vdpa", func(n *state.NIC) { n.VDPA = &state.VDPA{Name: "vdpa0", Created: true} }, "vdpa vdpa0"},
	} {
		for _, cmd := range []string{"gc", "detach"} {
			t.Run(c.name+"/"+cmd, func(t *testing.T) {
				q, h, dir := newFakeQEMU(t), newFakeHost(t, "probe-host-root.json"), t.TempDir()
				nic, err := Attach(ctxT(t), Request{QMP: q.sock, ID: "n1", StateDir: dir, Host: h})
				if err != nil {
					t.Fatal(err)
				}
				h.mu.Lock()
				h.links["nctl5"] = 50 // someone else's link of a netctl-like name
				h.vdpas["vdpa0"] = true
				h.mu.Unlock()
				c.edit(nic)
				killFake(t, q, dir, nic)
				if cmd == "gc" {
					res, err := GC(ctxT(t), GCRequest{StateDir: dir, Host: h, RunningSockets: func() ([]string, error) { return nil, nil }})
					if err != nil {
						t.Fatal(err)
					}
					if got := findCollected(t, res, "n1"); !strings.Contains(strings.Join(got.Done, "; "), "alone") {
						t.Errorf("gc does not say it left it alone: %+v", got)
					}
				} else if err := Detach(ctxT(t), DetachRequest{QMP: q.sock, ID: "n1", StateDir: dir, Host: h}); err != nil {
					t.Fatal(err)
				}
				h.mu.Lock()
				defer h.mu.Unlock()
				kind, name, _ := strings.Cut(c.keep, " ")
				if _, ok := h.links[name]; kind == "link" && !ok {
					t.Errorf("%s deleted link %s, which netctl did not create", cmd, name)
				}
				if kind == "vdpa" && !h.vdpas[name] {
					t.Errorf("%s deleted vdpa device %s, which netctl did not create", cmd, name)
				}
			})
		}
	}
}
