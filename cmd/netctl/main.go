// Command netctl sets up and explains in-kernel virtio-net data paths
// (vhost-net and vDPA) for virtual machines. Exit status: 0 success, 1
// failure, 2 usage error (see exitcode.go).
package main

import (
	"os"
	"time"
)

// mainStart is when main began (make bench's attach breakdown:
// NETCTL_STEP_TIMES).
var mainStart time.Time

func main() {
	mainStart = time.Now()
	os.Exit(runMain(os.Args, os.Stdout, os.Stderr))
}
