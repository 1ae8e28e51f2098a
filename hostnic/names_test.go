package hostnic

import (
	"strings"
	"testing"

	"github.com/netctl/netctl/state"
)

// TestNotCreated: a record (a file anyone with root can edit) that says
// netctl created a link or vdpa device is believed only for a name
// netctl gives, and a link only with an ifindex to tell it apart.
func TestNotCreated(t *testing.T) {
	for _, c := range []struct {
		kind, name string
		ifindex    int
		want       string // "" or a part of the reason
	}{
		{"tap", "nctl0", 7, ""},
		{"tap", "nctl12", 7, ""},
		{"tap", "eth0", 7, "netctl names the taps it creates nctlN"},
		{"tap", "nctlmv0", 7, "netctl names the taps it creates nctlN"},
		{"tap", "nctl0", 0, "no ifindex"},
		{"macvtap", "nctlmv3", 9, ""},
		{"macvtap", "nctl3", 9, "netctl names the macvtaps it creates nctlmvN"},
		{"macvtap", "nctlmv3", -1, "no ifindex"},
	} {
		got := NotCreatedLink(c.kind, &state.Link{Name: c.name, Ifindex: c.ifindex, Created: true})
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("NotCreatedLink(%s %s#%d) = %q, want %q", c.kind, c.name, c.ifindex, got, c.want)
		}
	}
	if got := NotCreatedVDPA(&state.VDPA{Name: VDPAName("v1"), Created: true}); got != "" {
		t.Errorf("NotCreatedVDPA(netctl-v1) = %q, want netctl's", got)
	}
	if got := NotCreatedVDPA(&state.VDPA{Name: "vdpa0", Created: true}); !strings.Contains(got, "an edited record") {
		t.Errorf("NotCreatedVDPA(vdpa0) = %q, want it left alone", got)
	}
}

func TestVDPAName(t *testing.T) {
	if got := VDPAName("v1"); got != "netctl-v1" {
		t.Errorf("VDPAName(v1) = %q", got)
	}
	long := strings.Repeat("a", 32) // the longest NIC id (state.CheckID)
	if got := VDPAName(long); len(got) != 32 || !strings.HasPrefix(got, VDPAPrefix) {
		t.Errorf("VDPAName(32 a) = %q: want netctl- and 32 bytes in all (the kernel's limit)", got)
	}
}

func TestValidVDPAName(t *testing.T) {
	for s, want := range map[string]bool{
		"netctl-v1": true, "vm1_vdpa0": true, strings.Repeat("x", 32): true,
		"": false, strings.Repeat("x", 33): false, "..": false, "a/b": false, "a.b": false, "a b": false, "vdpa\x00": false,
	} {
		if got := ValidVDPAName(s); got != want {
			t.Errorf("ValidVDPAName(%q) = %v, want %v", s, got, want)
		}
	}
}
