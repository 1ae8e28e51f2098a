package qemutest

import (
	"encoding/json"
	"slices"
	"testing"
)

// infoNetwork is QEMU 7.2's "info network" for a 2-queue NIC net1 on a
// tap netdev netctl-net1 and an unplugged netdev, as HMP prints it.
const infoNetwork = "net1: index=0,type=nic,model=virtio-net-pci,macaddr=52:54:00:12:34:56\r\n" +
	" \\ netctl-net1: index=0,type=tap,fd=21\r\n" +
	" \\ netctl-net1: index=1,type=tap,fd=23\r\n" +
	"spare: index=0,type=tap,fd=30\r\n"

func TestStateClientsAndHolds(t *testing.T) {
	s := &State{Devices: []string{"net1", "rp1"}, Network: infoNetwork, FDSets: []json.RawMessage{[]byte(`{"fdset-id":0}`)}}
	if got := s.Clients(); !slices.Equal(got, []string{"net1", "netctl-net1", "spare"}) {
		t.Errorf("Clients() = %q", got)
	}
	if got := s.Holds("net1", "netctl-net1"); got != "device net1, netdev netctl-net1, 1 fdset(s)" {
		t.Errorf("Holds(net1) = %q", got)
	}
	if got := (&State{}).Holds("net1", "netctl-net1"); got != "" {
		t.Errorf("empty state holds %q", got)
	}
	if got := (&State{}).Clients(); len(got) != 0 {
		t.Errorf("empty state's clients %q", got)
	}
}
