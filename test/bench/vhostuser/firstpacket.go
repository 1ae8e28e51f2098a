package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/test/bench/result"
	"github.com/netctl/netctl/test/l2"
	"github.com/netctl/netctl/test/vufront"
	"github.com/netctl/netctl/vhostuser"
)

// firstPacket starts a firmware-only QEMU (paused; cont as soon as QMP
// answers) with extra's NIC and returns the time from starting QEMU to
// the first DHCPDISCOVER on tap, and to QMP answering (QEMU has finished
// starting, the vhost-user handshake included).
func firstPacket(name, tap string, mac net.HardwareAddr, extra []string) (first, ready float64) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	srv, err := l2.ServeDHCP(tap, mac)
	if err != nil {
		fatal("%v", err)
	}
	defer srv.Close()
	srvStart := time.Now()
	t0 := time.Now()
	g, err := l2.StartFirmware(ctx, l2.Firmware{Name: name, SharedMemory: true, Extra: extra})
	if err != nil {
		fatal("%s: %v", name, err)
	}
	defer g.Close()
	c, err := qmp.Dial(ctx, g.QMP)
	if err != nil {
		fatal("%s: %v (QEMU: %s)", name, err, g.Stderr())
	}
	defer c.Close()
	ready = time.Since(t0).Seconds()
	if _, err := c.Execute(ctx, "cont", nil); err != nil {
		fatal("%s: cont: %v", name, err)
	}
	d, err := srv.Wait(ctx, l2.DHCPDiscover)
	if err != nil {
		fatal("%s: %v", name, err)
	}
	return srvStart.Add(d.At).Sub(t0).Seconds(), ready
}

// benchFirstPacket: QEMU on the bridge against QEMU's own vhost-net
// (tap,vhost=on), from QEMU's start to iPXE's first DHCP frame on the tap.
func benchFirstPacket() {
	if err := l2.Chroot(); err != nil {
		fatal("%v", err)
	}
	mac := net.HardwareAddr{0x52, 0x54, 0, 0, 0x0f, 0x25}
	// Bridge side: the bridge runs throughout; each round's QEMU is a new
	// front-end (a fresh handshake).
	tapA, err := macvtap.CreateTap(macvtap.TapConfig{Name: "vufpa0", VnetHdr: true, VnetHdrSize: 12})
	if err != nil {
		fatal("%v", err)
	}
	defer tapA.Close()
	// QEMU side: a persistent tap QEMU opens itself (ifname=), up before
	// QEMU starts so that the DHCP server can listen on it.
	tapB, err := macvtap.CreateTap(macvtap.TapConfig{Name: "vufpb0", VnetHdr: true, Persistent: true})
	if err != nil {
		fatal("%v", err)
	}
	tapB.Close()
	if ifi, err := net.InterfaceByName("vufpb0"); err == nil {
		defer macvtap.DeleteLinkIfSame("vufpb0", ifi.Index)
	}
	for _, n := range []string{"vufpa0", "vufpb0"} {
		os.WriteFile("/proc/sys/net/ipv6/conf/"+n+"/disable_ipv6", []byte("1"), 0)
		if err := macvtap.LinkUp(n); err != nil {
			fatal("%v", err)
		}
	}
	sock := l2.Run + "/vufp.sock"
	b, err := vhostuser.NewBridge(vhostuser.Config{Socket: l2.Root + sock, Backend: tapA,
		Offloads: macvtap.OffloadCSUM | macvtap.OffloadTSO4 | macvtap.OffloadTSO6})
	if err != nil {
		fatal("%v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- b.Serve(ctx) }()
	defer func() { cancel(); <-served; b.Close() }()
	var readyA, readyB []float64
	a, bb := interleave(
		func() float64 {
			for deadline := time.Now().Add(10 * time.Second); b.Status().Connected && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			v, r := firstPacket("vufpa", "vufpa0", mac, vufront.QEMUNIC("net1", sock, 1, mac))
			readyA = append(readyA, r)
			return v
		},
		func() float64 {
			v, r := firstPacket("vufpb", "vufpb0", mac, []string{
				"-netdev", "tap,id=n1,ifname=vufpb0,script=no,downscript=no,vhost=on",
				"-device", fmt.Sprintf("virtio-net-pci,netdev=n1,id=net1,mac=%s", mac)})
			readyB = append(readyB, r)
			return v
		})
	note := "firmware-only QEMU 7.2 (SeaBIOS + iPXE, nested TCG, 64 MiB shared memfd RAM on both sides), started paused and " +
		"continued as soon as QMP answered; most of the time is the firmware's boot"
	emit(result.Line{Bench: "vhostuser_first_dhcp_packet_bridge_vs_qemu_vhost_net", Unit: "s from QEMU's start to the first DHCPDISCOVER on the tap",
		A: result.NewSide("vhost_user_bridge", a, 1, 2), B: result.NewSide("qemu_tap_vhost_on", bb, 1, 2),
		Goal: "report (lower is better); the bridge should add no more than its handshake",
		Details: map[string]any{"note": note,
			"qmp_ready_s": map[string]result.Side{"bridge": result.NewSide("vhost_user_bridge", readyA, 1, 3),
				"qemu": result.NewSide("qemu_tap_vhost_on", readyB, 1, 3)}}})
}
