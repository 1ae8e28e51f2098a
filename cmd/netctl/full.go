package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// The netctl that make build, make install and the package ship is built
// with the netctl_split tag: the commands that need large libraries (the
// exporter's Prometheus client, the KubeVirt sidecar's gRPC) are not in its
// import graph, so that a call that does not need them (every hook call
// libvirt makes, every CNI call, every attach) does not pay their package
// initialisation. Those commands run netctl-full, the same command tree
// built without the tag, installed beside it (fullName).
const fullName = "netctl-full"

// fullEnv is set, to the split netctl's path, in the environment of the
// netctl-full a split netctl runs. A split netctl that finds it set was
// itself run as netctl-full (bin/netctl copied or linked there) and
// refuses to run netctl-full again, which would be itself, forever; the
// full build clears it (full_self.go), so that a netctl that netctl-full
// runs does not inherit it.
const fullEnv = "NETCTL_SPLIT_RAN_FULL"

// fullVersionEnv is set, to the split netctl's buildID, beside fullEnv:
// netctl-full runs only for a netctl of its own build (full_self.go).
// Another version (one of the two binaries replaced alone) may read the
// same command line otherwise, or not know it.
const fullVersionEnv = "NETCTL_SPLIT_VERSION"

// buildID names the build: the version and the commit, which make build
// gives both binaries alike.
func buildID() string {
	v := buildVersion()
	if v.Commit != "" {
		return v.Version + " (" + v.Commit + ")"
	}
	return v.Version
}

// fullPaths are where netctl looks for netctl-full, in order, given the
// directory of its own executable: PREFIX/libexec/netctl beside
// PREFIX/bin (make install, the package), then the same directory (make
// build's bin/, a container image).
func fullPaths(exeDir string) []string {
	return []string{
		filepath.Join(exeDir, "..", "libexec", "netctl", fullName),
		filepath.Join(exeDir, fullName),
	}
}

// findFull is the netctl-full to run, or an error saying where it was
// looked for and what to do.
func findFull(exe string) (string, error) {
	paths := fullPaths(filepath.Dir(exe))
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return filepath.Clean(p), nil
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("%s: %w", p, err)
		}
	}
	return "", fmt.Errorf("this command runs %s, which is not in %s or %s: install netctl whole (make install, or the package), or build it with 'go build ./cmd/netctl', which includes every command",
		fullName, filepath.Clean(paths[0]), filepath.Clean(paths[1]))
}
