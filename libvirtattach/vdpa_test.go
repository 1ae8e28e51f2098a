package libvirtattach

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"

	"libvirt.org/go/libvirtxml"

	"github.com/netctl/netctl/hostnic"
	"github.com/netctl/netctl/libvirtdom"
	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/policy/host"
	"github.com/netctl/netctl/state"
)

// probe612 is the 6.12 VM's probe (policy's testdata) with vdpa devices
// bound to vhost_vdpa: vdpa0 and another VM's vdpa1.
func probe612(t *testing.T) func(context.Context) (*host.Description, error) {
	t.Helper()
	b, err := os.ReadFile("../policy/testdata/probe-6.12.json")
	if err != nil {
		t.Fatal(err)
	}
	var d host.Description
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	feats := []string{"VERSION_1", "ACCESS_PLATFORM", "MAC", "STATUS", "MTU", "MRG_RXBUF", "EVENT_IDX"}
	d.VDPA.Devices = []host.VDPADevice{{Name: "vdpa0", Driver: "vhost_vdpa", Features: feats, FeaturesHex: "0x1"},
		{Name: "vdpa1", Driver: "vhost_vdpa", Features: feats, FeaturesHex: "0x1"}}
	return func(context.Context) (*host.Description, error) { c := d; return &c, nil }
}

// TestDecideVDPAOnlyNamed: the chain picks vdpa only for the device the
// request names; with none named (auto), a bound device that may be
// another VM's is passed by with the reason, and --backend vdpa alone is
// refused with it.
func TestDecideVDPAOnlyNamed(t *testing.T) {
	p := probe612(t)
	dec, err := decide(t.Context(), Request{Queues: 1, Probe: p}, nil, "7.2.0", "", "kvm")
	if err != nil {
		t.Fatal(err)
	}
	if dec.Backend != policy.BackendVhostNet || len(dec.Steps) == 0 || dec.Steps[0].Backend != policy.BackendVDPA ||
		!strings.Contains(dec.Steps[0].Reason, "no --vdpa DEV or --mgmtdev MGMTDEV given") {
		t.Errorf("auto with nothing named: %s, steps %+v", dec.Backend, dec.Steps)
	}
	if _, err := decide(t.Context(), Request{Backend: policy.BackendVDPA, Queues: 1, Probe: p}, nil, "7.2.0", "", "kvm"); err == nil ||
		!strings.Contains(err.Error(), "no --vdpa DEV") {
		t.Errorf("--backend vdpa with nothing named: %v", err)
	}
	dec, err = decide(t.Context(), Request{Queues: 1, Probe: p}, nil, "7.2.0", "vdpa1", "kvm")
	if err != nil || dec.Backend != policy.BackendVDPA {
		t.Errorf("auto naming vdpa1: %s %v", dec.Backend, err)
	}
	if _, err := decide(t.Context(), Request{Backend: policy.BackendVDPA, Queues: 1, Probe: p}, nil, "7.2.0", "vdpa9", "kvm"); err == nil ||
		!strings.Contains(err.Error(), "vdpa device vdpa9 does not exist") {
		t.Errorf("--backend vdpa naming a missing device: %v", err)
	}
}

// TestInterfaceXMLVDPA: a vdpa NIC is <interface type='vdpa'> on the
// vhost-vdpa node with netctl's alias and no tap.
func TestInterfaceXMLVDPA(t *testing.T) {
	mac, _ := net.ParseMAC("52:54:00:00:00:08")
	s, _, err := interfaceXML(libvirtdom.NIC{VDPA: "/dev/vhost-vdpa-0", MAC: mac}, policy.Decision{Backend: policy.BackendVDPA}, Alias("net8"))
	if err != nil {
		t.Fatal(err)
	}
	var x libvirtxml.DomainInterface
	if err := x.Unmarshal(s); err != nil {
		t.Fatalf("%v\n%s", err, s)
	}
	if x.Source == nil || x.Source.VDPA == nil || x.Source.VDPA.Device != "/dev/vhost-vdpa-0" || x.Target != nil ||
		x.Alias == nil || x.Alias.Name != "ua-netctl-net8" || !strings.Contains(s, "type=\"vdpa\"") {
		t.Errorf("interface XML:\n%s", s)
	}
}

// identityHost answers VDPAIdentity with ino (0: gone) and records
// DeleteVDPA.
type identityHost struct {
	hostnic.Host
	ino     uint64
	deleted []string
}

func (h *identityHost) VDPAIdentity(name string) (uint64, error) {
	if h.ino == 0 {
		return 0, fmt.Errorf("vdpa %s: %w", name, os.ErrNotExist)
	}
	return h.ino, nil
}

func (h *identityHost) DeleteVDPA(_ context.Context, name string) error {
	h.deleted = append(h.deleted, name)
	return nil
}

// TestDeleteVDPAOnlyRecorded: detach deletes a vdpa device only when
// netctl created it and it is still that device (same sysfs identity);
// one gone, one added again under the name, one netctl did not make, or
// a record naming another's device are left alone.
func TestDeleteVDPAOnlyRecorded(t *testing.T) {
	for _, c := range []struct {
		name string
		v    *state.VDPA
		ino  uint64
		del  bool
	}{
		{"the recorded device", &state.VDPA{Name: "netctl-a", Created: true, Ino: 7}, 7, true},
		{"deleted and added again", &state.VDPA{Name: "netctl-a", Created: true, Ino: 7}, 8, false},
		{"gone", &state.VDPA{Name: "netctl-a", Created: true, Ino: 7}, 0, false},
		{"not created by netctl", &state.VDPA{Name: "vdpa0", Ino: 7}, 7, false},
		{"not netctl's name", &state.VDPA{Name: "vdpa0", Created: true, Ino: 7}, 7, false},
		{"no identity kept", &state.VDPA{Name: "netctl-a", Created: true}, 9, true},
		{"none", nil, 7, false},
	} {
		h := &identityHost{ino: c.ino}
		if err := deleteVDPA(t.Context(), h, c.v); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		if (len(h.deleted) == 1) != c.del {
			t.Errorf("%s: deleted %v, want deleted %v", c.name, h.deleted, c.del)
		}
	}
}
