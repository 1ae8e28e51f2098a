package main

import (
	"net"
	"testing"

	"libvirt.org/go/libvirtxml"

	"github.com/netctl/netctl/hook"
)

// TestPinsOnlyTheManagedInterface: hook pin finds a decided interface
// by its MAC, and only an interface of its type and device is it: a
// bridge interface that shares the MAC (netctl does not manage it, even
// under "manage": "all") gets no <driver> (review: it was pinned too).
func TestPinsOnlyTheManagedInterface(t *testing.T) {
	mac, _ := net.ParseMAC("52:54:00:aa:00:01")
	tap := hook.Interface{Kind: hook.KindTap, MAC: mac, Name: "vm1tap0"}
	direct := hook.Interface{Kind: hook.KindDirect, MAC: mac, Name: "eth0"}
	parse := func(s string) *libvirtxml.DomainInterface {
		var x libvirtxml.DomainInterface
		if err := x.Unmarshal(s); err != nil {
			t.Fatal(err)
		}
		return &x
	}
	for _, c := range []struct {
		name string
		xml  string
		it   hook.Interface
		want bool
	}{
		{"the tap", `<interface type='ethernet'><mac address='52:54:00:aa:00:01'/><target dev='vm1tap0' managed='no'/></interface>`, tap, true},
		{"a bridge sharing the MAC", `<interface type='bridge'><mac address='52:54:00:aa:00:01'/><source bridge='br0'/></interface>`, tap, false},
		{"another tap sharing the MAC", `<interface type='ethernet'><mac address='52:54:00:aa:00:01'/><target dev='other0'/></interface>`, tap, false},
		{"the direct one", `<interface type='direct'><mac address='52:54:00:aa:00:01'/><source dev='eth0' mode='bridge'/></interface>`, direct, true},
		{"a direct one on another device", `<interface type='direct'><mac address='52:54:00:aa:00:01'/><source dev='eth1' mode='bridge'/></interface>`, direct, false},
		{"a network sharing the MAC", `<interface type='network'><mac address='52:54:00:aa:00:01'/><source network='default'/></interface>`, direct, false},
	} {
		if got := pinsInterface(parse(c.xml), c.it); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
