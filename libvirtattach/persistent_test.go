package libvirtattach

import (
	"regexp"
	"strings"
	"testing"
)

// TestPersistentTapName: stable per domain and id, distinct across ids
// and domains, a valid interface name, never one the kernel's nctl%d
// gives another attach; and the alias is the one the hook knows
// (hook.AttachAliasPrefix).
func TestPersistentTapName(t *testing.T) {
	const u1, u2 = "6a4f3b1e-0d2c-4e8f-9a7b-5c6d7e8f9a0b", "11111111-2222-3333-4444-555555555555"
	a := PersistentTapName(u1, "net1")
	if a != PersistentTapName(strings.ToUpper(u1), "net1") {
		t.Errorf("not stable across the UUID's case")
	}
	seen := map[string]bool{}
	for _, u := range []string{u1, u2} {
		for _, id := range []string{"net1", "net2", "a"} {
			n := PersistentTapName(u, id)
			if seen[n] {
				t.Errorf("%s twice", n)
			}
			seen[n] = true
			if len(n) > 15 || !regexp.MustCompile(`^nctlp[0-9a-f]{8}$`).MatchString(n) || regexp.MustCompile(`^nctl[0-9]+$`).MatchString(n) {
				t.Errorf("name %q", n)
			}
		}
	}
	if Alias("net1") != "ua-netctl-net1" {
		t.Errorf("alias %q: the hook recognises ua-netctl-ID", Alias("net1"))
	}
}
