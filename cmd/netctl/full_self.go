//go:build !netctl_split

package main

import "os"

// The full build is what a split netctl runs as netctl-full: fullEnv
// (full.go) is for this process alone, not for any netctl it runs.
func init() { os.Unsetenv(fullEnv) }
