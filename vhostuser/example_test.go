package vhostuser_test

import (
	"context"
	"log"
	"log/slog"
	"os"
	"os/signal"

	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/vhostuser"
)

// Serve a 2-queue tap to one vhost-user front-end at a time, as `netctl
// vhost-user --tap vu0 --queues 2 --socket /run/vu0.sock --owner 107:107`
// does: open everything, drop privileges, serve until interrupted.
func Example() {
	tap, err := macvtap.CreateTap(macvtap.TapConfig{Name: "vu0", VnetHdr: true, VnetHdrSize: 12, Queues: 2})
	if err != nil {
		log.Fatal(err)
	}
	defer tap.Close()
	offloads, _ := macvtap.ProbeOffloads(macvtap.KindTap)
	b, err := vhostuser.NewBridge(vhostuser.Config{Socket: "/run/vu0.sock", Owner: &vhostuser.Owner{UID: 107, GID: 107},
		Backend: tap, Queues: 2, Offloads: offloads, Logger: slog.Default()})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	if _, err := vhostuser.DropPrivileges(107, 107); err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := b.Serve(ctx); err != nil {
		log.Fatal(err)
	}
}
