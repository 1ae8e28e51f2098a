package attach

import (
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/state"
)

// TestGCInterruptedAttachRecords: records an attach left as intents
// (status attaching; its QEMU gone). gc deletes the macvtap one names by
// name, lower device and MAC (it was recorded before it existed, so with
// ifindex 0), passes by a link of that name that is not it (another
// MAC), says when the macvtap was never created, and leaves a vdpa device
// that another NIC's record names alone.
func TestGCInterruptedAttachRecords(t *testing.T) {
	h, dir := newFakeHost(t, "probe-host-root.json"), t.TempDir()
	st, err := state.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	mac := func(s string) net.HardwareAddr { m, _ := net.ParseMAC(s); return m }
	if _, err := h.CreateMacvtap(MacvtapSpec{Name: "nctlmv3", Lower: "eth0", MAC: mac("52:54:00:00:00:03"), Queues: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.CreateMacvtap(MacvtapSpec{Name: "nctlmv4", Lower: "eth0", MAC: mac("52:54:00:00:00:99"), Queues: 1}); err != nil {
		t.Fatal(err)
	}
	h.vdpas["netctl-v1"] = true
	rec := func(vm, id, m string) *state.NIC {
		return &state.NIC{Schema: state.Schema, VM: vm, QEMUPID: os.Getpid(), QEMUStart: 1, QMP: "/run/" + vm + ".qmp", ID: id, Netdev: NetdevID(id),
			Backend: "userspace", Queues: 1, MAC: m, Status: state.StatusAttaching, Attached: time.Now().UTC(), FDNames: []string{"netctl-" + id + "-tap0"}}
	}
	a := rec("vma", "n3", "52:54:00:00:00:03")
	a.Macvtap = &state.Link{Name: "nctlmv3", Lower: "eth0", Mode: "bridge", Created: true}
	b := rec("vmb", "n4", "52:54:00:00:00:04") // nctlmv4 has another MAC: not this attach's
	b.Macvtap = &state.Link{Name: "nctlmv4", Lower: "eth0", Mode: "bridge", Created: true}
	c := rec("vmc", "n5", "52:54:00:00:00:05")
	c.Macvtap = &state.Link{Name: "nctlmv5", Lower: "eth0", Mode: "bridge", Created: true}
	d := rec("vmd", "v1", "52:54:00:00:00:06")
	d.Backend, d.VDPA = "vdpa", &state.VDPA{Name: "netctl-v1", Mgmtdev: "vdpasim_net", Created: true}
	other := rec("vme", "v1", "52:54:00:00:00:07")
	other.Backend, other.Status, other.VDPA = "vdpa", state.StatusAttached, &state.VDPA{Name: "netctl-v1", Mgmtdev: "vdpasim_net", Created: true}
	other.QEMUStart, _ = state.ProcStartTime(os.Getpid()) // its QEMU runs
	for _, n := range []*state.NIC{a, b, c, d, other} {
		if err := st.Save(n); err != nil {
			t.Fatal(err)
		}
	}
	res, err := GC(ctxT(t), GCRequest{StateDir: dir, Host: h, RunningSockets: func() ([]string, error) { return nil, nil }})
	t.Logf("gc: %+v, %v", res, err)
	if h.LinkExists("nctlmv3", 0) {
		t.Errorf("nctlmv3, which the interrupted attach of n3 created, is left")
	}
	if !h.LinkExists("nctlmv4", 0) {
		t.Errorf("nctlmv4 (another MAC: not n4's) was deleted")
	}
	if !h.vdpas["netctl-v1"] {
		t.Errorf("vdpa device netctl-v1, which NIC v1 of vme uses, was deleted")
	}
	done := map[string]string{}
	for _, n := range res.NICs {
		done[n.VM] = n.Action + ": " + strings.Join(n.Done, ", ")
	}
	if !strings.Contains(done["vmc"], "never created") || !strings.HasPrefix(done["vmc"], GCRemoved) {
		t.Errorf("vmc: %q; want removed, saying nctlmv5 was never created", done["vmc"])
	}
	if !strings.Contains(done["vmd"], "left vdpa device netctl-v1 alone") {
		t.Errorf("vmd: %q; want the vdpa device left alone", done["vmd"])
	}
	if recs, _, _ := st.List(""); len(recs) != 1 || recs[0].VM != "vme" {
		t.Errorf("records after gc: %d; want only vme's", len(recs))
	}
}
