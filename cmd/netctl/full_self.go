//go:build !netctl_split

package main

import (
	"fmt"
	"os"
)

// The full build is what a split netctl runs as netctl-full. It runs
// only for a split netctl of its own build (fullVersionEnv, full.go),
// and fullEnv and fullVersionEnv are for this process alone, not for
// any netctl it runs.
func init() {
	split, splitVer := os.Getenv(fullEnv), os.Getenv(fullVersionEnv)
	os.Unsetenv(fullEnv)
	os.Unsetenv(fullVersionEnv)
	if split == "" || splitVer == "" {
		return
	}
	if own := buildID(); splitVer != own {
		fmt.Fprintf(os.Stderr, "netctl: %s is netctl %s, and %s beside it (%s) is netctl %s: they are two halves of one build (a partial upgrade?): install both from one build (make install, or the package)\n",
			split, splitVer, fullName, os.Args[0], own)
		os.Exit(exitFailure)
	}
}
