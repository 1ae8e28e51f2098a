package vdpa_test

import (
	"context"
	"fmt"
	"time"

	"github.com/netctl/netctl/vdpa"
)

// The main flow: add a device on a management device, open its vhost-vdpa
// node, and delete it again, each netlink call under a deadline (like
// `vdpa dev add name vdpa0 mgmtdev vduse`, then `vdpa dev del vdpa0`).
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := vdpa.Dial(ctx) // the Client owns its netlink socket
	if err != nil {
		fmt.Println(err) // wraps vdpa.ErrNotAvailable without the vdpa module
		return
	}
	defer c.Close()
	if err := c.AddDevice(ctx, vdpa.AddOptions{Name: "vdpa0", MgmtDev: "vduse"}); err != nil {
		fmt.Println(err)
		return
	}
	path, err := vdpa.VhostVDPAPath("vdpa0")
	if err == nil {
		d, err := vdpa.OpenVhost(ctx, path) // the VhostDevice owns this fd
		if err == nil {
			fmt.Println("maps by", d.MapMode())
			d.Close() // before the delete: the kernel holds a delete while the fd is open
		}
	}
	if err := c.DeleteDevice(ctx, "vdpa0"); err != nil {
		fmt.Println(err) // wraps vdpa.ErrBusy while a process holds the node
	}
}
