package migrate_test

import (
	"net"

	"context"
	"github.com/vishvananda/netlink"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/attach"
	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/migrate"
	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/test/qemutest"
	"github.com/netctl/netctl/virtio"
)

// TestHostIncomingRefusesBeforeAnyNIC: a QEMU waiting for its guest
// (-incoming defer) cannot unplug a NIC (no guest answers), so incoming
// must refuse a manifest whose second NIC cannot be re-created before it
// adds the first: an id QEMU already has, a MAC or slot attach refuses,
// a negotiated bit the plan leaves out, the same slot twice. Nothing is
// added to QEMU and no record is left.
func TestHostIncomingRefusesBeforeAnyNIC(t *testing.T) {
	testenv.Host(t)
	good := migrate.NIC{ID: "net1", MAC: "52:54:00:22:00:01", Queues: 1, Backend: "userspace", Profile: "throughput", Addr: "0x4",
		Offered: []string{"CSUM", "GUEST_CSUM", "VERSION_1", "RING_RESET"}, Negotiated: []string{"CSUM", "VERSION_1"}}
	second := func(f func(*migrate.NIC)) migrate.NIC {
		n := good
		n.ID, n.MAC, n.Addr = "net2", "52:54:00:22:00:02", "0x5"
		f(&n)
		return n
	}
	for _, c := range []struct {
		name string
		nic  migrate.NIC
		pool *policy.Pool
	}{
		{"id QEMU has", second(func(n *migrate.NIC) { n.ID = "taken" }), nil},
		{"multicast MAC", second(func(n *migrate.NIC) { n.MAC = "01:00:5e:00:00:01" }), nil},
		{"bad slot", second(func(n *migrate.NIC) { n.Addr = "0x40" }), nil},
		{"same slot twice", second(func(n *migrate.NIC) { n.Addr = good.Addr }), nil},
		{"same MAC twice", second(func(n *migrate.NIC) { n.MAC = good.MAC }), nil},
		{"slot a QEMU device holds", second(func(n *migrate.NIC) { n.Addr = "0x6" }), nil},
		{"tap not on this host", second(func(n *migrate.NIC) { n.Tap = "nctap-absent" }), nil},
		{"tap another process holds", second(func(n *migrate.NIC) { n.Tap = "nctap-held" }), nil},
		{"a negotiated bit this host cannot offer", second(func(n *migrate.NIC) {
			n.Offered, n.Negotiated = append(n.Offered, "HOST_USO"), append(n.Negotiated, "HOST_USO")
		}), nil},
		{"plan leaves out a negotiated bit", second(func(n *migrate.NIC) { n.Negotiated = append(n.Negotiated, "RING_RESET") }),
			&policy.Pool{ID: "fs-x", Offer: policy.Managed() &^ virtio.RingReset, Hosts: []string{"a", "b"}}},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			sock, _ := qemutest.StartPaused(t, "dst", "-incoming", "defer", "-device", "virtio-rng-pci,id=taken,addr=0x6")
			dir := t.TempDir()
			held, err := macvtap.CreateTap(macvtap.TapConfig{Name: "nctap-held", VnetHdr: true, Queues: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer held.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			m := &migrate.Manifest{Schema: migrate.Schema, NICs: []migrate.NIC{good, c.nic}}
			nics, err := migrate.Incoming(ctx, migrate.IncomingRequest{QMP: sock, Manifest: m, Pool: c.pool, StateDir: dir})
			if err == nil {
				t.Fatalf("incoming took the manifest: %+v", nics)
			}
			t.Logf("refused: %v", err)
			cl, derr := qmp.Dial(ctx, sock)
			if derr != nil {
				t.Fatal(derr)
			}
			defer cl.Close()
			var props []struct{ Name string }
			if err := cl.Run(ctx, "qom-list", map[string]string{"path": "/machine/peripheral"}, &props); err != nil {
				t.Fatal(err)
			}
			for _, p := range props {
				if p.Name == "net1" {
					t.Errorf("net1 was added to the waiting QEMU before the refusal (%d NICs returned)", len(nics))
				}
			}
			cl.Close()
			ls, err := attach.List(ctx, attach.ListRequest{StateDir: dir})
			if err != nil || len(ls) != 0 {
				t.Errorf("records left: %+v %v", ls, err)
			}
		})
	}
	// The two NICs as they are: both come, at their slots.
	sock, _ := qemutest.StartPaused(t, "dst", "-incoming", "defer", "-device", "virtio-rng-pci,id=taken,addr=0x6")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	m := &migrate.Manifest{Schema: migrate.Schema, NICs: []migrate.NIC{good, second(func(*migrate.NIC) {})}}
	nics, err := migrate.Incoming(ctx, migrate.IncomingRequest{QMP: sock, Manifest: m, StateDir: dir})
	if err != nil || len(nics) != 2 {
		t.Fatalf("incoming of two good NICs: %+v %v", nics, err)
	}
	t.Cleanup(func() { attach.GC(context.Background(), attach.GCRequest{StateDir: dir}) })
}

// TestHostIncomingQ35Buses: on q35 a NIC sits on its source's
// pcie-root-port (bus=): a second NIC whose port this QEMU lacks, or
// whose port already holds a device, is refused before the first is
// added.
func TestHostIncomingQ35Buses(t *testing.T) {
	testenv.Host(t)
	good := migrate.NIC{ID: "net1", MAC: "52:54:00:22:00:01", Queues: 1, Profile: "throughput", Bus: "rp1", Addr: "0x0"}
	for _, bus := range []string{"rp9", "rp2"} {
		t.Run(bus, func(t *testing.T) {
			sock, _ := qemutest.StartPaused(t, "dst", "-machine", "q35", "-incoming", "defer",
				"-device", "pcie-root-port,id=rp1,bus=pcie.0,chassis=1", "-device", "pcie-root-port,id=rp2,bus=pcie.0,chassis=2",
				"-device", "virtio-rng-pci,id=rng,bus=rp2")
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			dir := t.TempDir()
			second := good
			second.ID, second.MAC, second.Bus = "net2", "52:54:00:22:00:02", bus
			m := &migrate.Manifest{Schema: migrate.Schema, NICs: []migrate.NIC{good, second}}
			nics, err := migrate.Incoming(ctx, migrate.IncomingRequest{QMP: sock, Manifest: m, StateDir: dir})
			if err == nil {
				t.Fatalf("incoming took NIC net2 on bus %s: %+v", bus, nics)
			}
			t.Logf("refused: %v", err)
			if len(nics) != 0 {
				t.Errorf("%d NIC(s) added to the waiting QEMU before the refusal", len(nics))
			}
			if ls, err := attach.List(ctx, attach.ListRequest{StateDir: dir}); err != nil || len(ls) != 0 {
				t.Errorf("records left: %+v %v", ls, err)
			}
		})
	}
	t.Run("rp1 alone", func(t *testing.T) {
		sock, _ := qemutest.StartPaused(t, "dst", "-machine", "q35", "-incoming", "defer", "-device", "pcie-root-port,id=rp1,bus=pcie.0,chassis=1")
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		dir := t.TempDir()
		nics, err := migrate.Incoming(ctx, migrate.IncomingRequest{QMP: sock, Manifest: &migrate.Manifest{Schema: migrate.Schema, NICs: []migrate.NIC{good}}, StateDir: dir})
		if err != nil || len(nics) != 1 || nics[0].Properties["bus"] != "rp1" {
			t.Fatalf("incoming of net1 on rp1: %+v %v", nics, err)
		}
	})
}

// TestHostIncomingMacvtapMACTaken: on one host, the source's macvtap
// holds the guest's MAC on the lower device, and the kernel refuses a
// second macvtap with that MAC up on it (EADDRINUSE): incoming refuses
// such a NIC before the first NIC is added.
func TestHostIncomingMacvtapMACTaken(t *testing.T) {
	testenv.Host(t)
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "nclow0"}, PeerName: "nclow1"}
	if err := netlink.LinkAdd(veth); err != nil {
		t.Fatal(err)
	}
	low, err := netlink.LinkByName("nclow0")
	if err != nil {
		t.Fatal(err)
	}
	netlink.LinkSetUp(low)
	mac, _ := net.ParseMAC("52:54:00:22:00:02")
	src := &netlink.Macvtap{Macvlan: netlink.Macvlan{LinkAttrs: netlink.LinkAttrs{Name: "ncsrcmv", ParentIndex: low.Attrs().Index, HardwareAddr: mac}, Mode: netlink.MACVLAN_MODE_BRIDGE}}
	if err := netlink.LinkAdd(src); err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetUp(src); err != nil {
		t.Fatal(err)
	}
	sock, _ := qemutest.StartPaused(t, "dst", "-incoming", "defer")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	m := &migrate.Manifest{Schema: migrate.Schema, NICs: []migrate.NIC{
		{ID: "net1", MAC: "52:54:00:22:00:01", Queues: 1, Profile: "throughput", Addr: "0x4"},
		{ID: "net2", MAC: mac.String(), Queues: 1, Profile: "throughput", Addr: "0x5", MacvtapOn: "nclow0:bridge"},
	}}
	nics, err := migrate.Incoming(ctx, migrate.IncomingRequest{QMP: sock, Manifest: m, StateDir: dir})
	if err == nil {
		t.Fatalf("incoming took a macvtap whose MAC the lower already has up: %+v", nics)
	}
	t.Logf("refused: %v", err)
	if len(nics) != 0 {
		t.Errorf("%d NIC(s) added to the waiting QEMU before the refusal", len(nics))
	}
	if ls, err := attach.List(ctx, attach.ListRequest{StateDir: dir}); err != nil || len(ls) != 0 {
		t.Errorf("records left: %+v %v", ls, err)
	}
}
