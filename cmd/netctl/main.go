// Command netctl sets up and explains in-kernel virtio-net data paths
// (vhost-net and vDPA) for virtual machines.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newApp().Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "netctl:", err)
		os.Exit(exitCode(err))
	}
}
