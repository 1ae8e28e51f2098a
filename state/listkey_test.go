package state

import "testing"

// TestListKeyIsExact: VM names may hold '.', so the file-name prefix of
// VM "web1" also starts the files of VM "web1.b" ("web1.b.net1.json").
// List of one VM's key must return that VM's records only: before the
// fix, netctl list --vm web1 showed web1.b's NIC as web1's.
func TestListKeyIsExact(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a, b := sample(), sample()
	b.VM, b.QMP = "web1.b", "/run/web1b.qmp"
	for _, n := range []*NIC{a, b} {
		if err := s.Save(n); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []*NIC{a, b} {
		got, bad, err := s.List(VMKey(want.VM))
		if err != nil || len(bad) != 0 || len(got) != 1 || got[0].VM != want.VM {
			var vms []string
			for _, n := range got {
				vms = append(vms, n.VM)
			}
			t.Errorf("List(%q): VMs %q, bad %v, err %v; want only %q", VMKey(want.VM), vms, bad, err, want.VM)
		}
	}
}
