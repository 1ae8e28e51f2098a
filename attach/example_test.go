package attach_test

import (
	"context"
	"fmt"
	"time"

	"github.com/netctl/netctl/attach"
)

// Give the VM behind /run/vm1.qmp a 2-queue NIC on the best backend this
// host has, then take it away again. Like netctl attach --qmp
// /run/vm1.qmp --id net1 --queues 2; netctl detach --qmp /run/vm1.qmp
// --id net1.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nic, err := attach.Attach(ctx, attach.Request{QMP: "/run/vm1.qmp", ID: "net1", Queues: 2})
	if err != nil {
		fmt.Println(err) // names the step that failed; everything was undone
		return
	}
	fmt.Println(nic.Backend, nic.FDNames) // "vhost-net [netctl-net1-tap0 netctl-net1-tap1 netctl-net1-vhost0 netctl-net1-vhost1]"
	if err := attach.Detach(ctx, attach.DetachRequest{QMP: "/run/vm1.qmp", ID: "net1", Timeout: 30 * time.Second}); err != nil {
		fmt.Println(err) // errors.Is(err, attach.ErrTimeout): the guest did not let go
	}
}
