package attach

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/netctl/netctl/policy/host"
	"github.com/netctl/netctl/policy/probe"
)

// TestAttachVDPAReasons: on a host with vdpa and a device bound to
// vhost_vdpa, attach without --vdpa or --mgmtdev skips vDPA (the device
// may be another VM's) and says how to pick one; --backend vdpa with a
// device that does not exist fails with that reason, nothing changed.
func TestAttachVDPAReasons(t *testing.T) {
	q, h, dir := newFakeQEMU(t), newFakeHost(t, "probe-6.12-vdpa.json"), t.TempDir()
	nic, err := Attach(ctxT(t), Request{QMP: q.sock, ID: "n1", StateDir: dir, Host: h})
	if err != nil {
		t.Fatal(err)
	}
	want := "no --vdpa DEV or --mgmtdev MGMTDEV given (a device bound to vhost_vdpa may be another VM's): " +
		"netctl vdpa dev show lists the devices, netctl vdpa mgmtdev show the management devices"
	if nic.Backend != "vhost-net" || nic.Steps[0].Backend != "vdpa" || nic.Steps[0].Reason != want {
		t.Errorf("steps %+v", nic.Steps)
	}
	if err := Detach(ctxT(t), DetachRequest{QMP: q.sock, ID: "n1", StateDir: dir, Host: h}); err != nil {
		t.Fatal(err)
	}
	_, err = Attach(ctxT(t), Request{QMP: q.sock, ID: "n2", Backend: "vdpa", VDPA: "nosuch0", StateDir: dir, Host: h})
	if want := "attach: choose the backend: policy: backend vdpa is not available here: vdpa device nosuch0 does not exist (netctl vdpa dev show)"; !errors.Is(err, ErrNotAvailable) || err == nil || err.Error() != want {
		t.Errorf("--vdpa nosuch0:\n got %v\nwant %s", err, want)
	}
	nothingLeft(t, "after the refused attach", q, h, dir)
}

// TestAttachProbesWhatItDecidesBy: an attach that names no vdpa device
// does not read the vdpa family, and only the latency profile measures
// busy-polling; with --vdpa the family is read. The vdpa step's reason
// is the same either way.
func TestAttachProbesWhatItDecidesBy(t *testing.T) {
	q, h, dir := newFakeQEMU(t), newFakeHost(t, "probe-6.12-vdpa.json"), t.TempDir()
	for i, tc := range []struct {
		req                          Request
		noVDPA, vhostNetFeaturesOnly bool
	}{
		{Request{}, true, true},
		{Request{Profile: "latency"}, true, false},
		{Request{Backend: "vdpa", VDPA: "nosuch0"}, false, true},
	} {
		r := tc.req
		r.QMP, r.ID, r.StateDir, r.Host = q.sock, fmt.Sprintf("n%d", i), dir, h
		_, err := Attach(ctxT(t), r)
		if err == nil {
			if err := Detach(ctxT(t), DetachRequest{QMP: q.sock, ID: r.ID, StateDir: dir, Host: h}); err != nil {
				t.Fatal(err)
			}
		}
		got := h.specs[len(h.specs)-1]
		if got.NoVDPA != tc.noVDPA || got.VhostNetFeaturesOnly != tc.vhostNetFeaturesOnly {
			t.Errorf("%+v: probed with %+v", tc.req, got)
		}
	}
	// A probe without vdpa gives the same vdpa reason as one with it.
	h.desc.VDPA = host.VDPA{Error: probe.VDPANotAsked}
	nic, err := Attach(ctxT(t), Request{QMP: q.sock, ID: "n9", StateDir: dir, Host: h})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(nic.Steps[0].Reason, "no --vdpa DEV or --mgmtdev MGMTDEV given") {
		t.Errorf("vdpa step %+v", nic.Steps[0])
	}
}
