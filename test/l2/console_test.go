package l2

import "testing"

// The console is read while the L2 init is still writing it: a line cut
// mid-way ("features=00100" of a 64-bit word) is not a NIC yet. Seen on
// 6.1 under nested KVM, where the L2 writes fast enough to be caught
// mid-line.
func TestParseNICsCompleteLinesOnly(t *testing.T) {
	console := "L2-INIT uptime=8.58\r\n" +
		"L2-NIC eth0 mac=52:54:00:00:00:10 driver=virtio_net features=1110010111 uptime=10.47\r\n" +
		"L2-NIC eth1 mac=52:54:00:00:00:11 driver=virtio_net features=1110010001 uptime=10.69\n" +
		"L2-NIC eth3 mac=52:54:00:00:00:13 driver=virtio_net features=00100"
	nics := ParseNICs(console)
	if len(nics) != 2 {
		t.Fatalf("got %d NICs, want 2 (the cut line is not one): %v", len(nics), nics)
	}
	if n := nics["52:54:00:00:00:10"]; n.Name != "eth0" || n.Driver != "virtio_net" || n.Features != "1110010111" {
		t.Errorf("eth0: %+v", n)
	}
	if n := nics["52:54:00:00:00:11"]; n.Name != "eth1" || n.Features != "1110010001" {
		t.Errorf("eth1: %+v", n)
	}
	if _, ok := nics["52:54:00:00:00:13"]; ok {
		t.Error("the cut line counted as a NIC")
	}
}
