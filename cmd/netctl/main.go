// Command netctl sets up and explains in-kernel virtio-net data paths
// (vhost-net and vDPA) for virtual machines. Exit status: 0 success, 1
// failure, 2 usage error (see exitcode.go).
package main

import "os"

func main() {
	os.Exit(runMain(os.Args, os.Stdout, os.Stderr))
}
