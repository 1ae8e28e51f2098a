package qemuproc_test

import (
	"context"
	"fmt"
	"time"

	"github.com/netctl/netctl/qemuproc"
)

// Find the VM the user named (--vm web1, or --qmp SOCKET) and talk to it,
// as netctl attach does.
func ExampleResolve() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	vm, err := qemuproc.Resolve(ctx, "web1", "")
	if err != nil {
		fmt.Println(err) // no VM named "web1"; running: ... / two named web1: use --qmp
		return
	}
	c, err := qemuproc.Dial(ctx, vm) // the first monitor that greets; busy ones are skipped
	if err != nil {
		fmt.Println(err) // every monitor in use (by whom), or libvirt's VM: use the hook
		return
	}
	defer c.Close()
	var status struct{ Status string }
	if err := c.Run(ctx, "query-status", nil, &status); err == nil {
		fmt.Printf("VM %s (pid %d) is %s\n", vm.Name, vm.PID, status.Status)
	}
}
