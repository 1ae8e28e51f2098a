package main

import "testing"

// TestClipNIC: the table's first column shortens the VM's name first, so
// the NIC id that tells one VM's rows apart stays whole.
func TestClipNIC(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"web1/net0", "web1/net0"},
		{"nctldemo-ok/net1", "nctldemo-~/net1"},
		{"a-very-long-vm-name/net1", "a-very-lo~/net1"},
		{"vm/a-nic-id-far-too-long", "vm/a-nic-id-fa~"},
		{"noslash-and-far-too-long", "noslash-and-fa~"},
	} {
		if got := clipNIC(c.in, nicCol); got != c.want || len([]rune(got)) > nicCol {
			t.Errorf("clipNIC(%q, %d) = %q, want %q", c.in, nicCol, got, c.want)
		}
	}
}
