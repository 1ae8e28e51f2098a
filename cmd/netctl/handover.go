package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"

	"github.com/netctl/netctl/libvirtdom"
)

// The split netctl runs netctl-full in its own place (execve: same pid,
// arguments, environment and fds) when a command reaches libvirtdom.Dial,
// which only netctl-full can do (full_split.go). That is transparent only
// while the command has shown nothing and taken nothing: netctl-full
// starts the command again from its first step, so output already
// written would be written twice and stdin already read would be missing.
// runApp's writers and stdinReader record both.
var (
	outputWritten atomic.Bool // a byte reached the command's stdout or stderr (runApp's safeWriters)
	stdinRead     atomic.Bool // a read of stdin through stdinReader
)

// stdinReader is os.Stdin for commands: it records that stdin was read.
type stdinReader struct{}

func (stdinReader) Read(p []byte) (int, error) {
	stdinRead.Store(true)
	return os.Stdin.Read(p)
}

var stdin io.Reader = stdinReader{}

// handOver runs exec (netctl-full in this process's place) if nothing was
// written or read yet, else fails saying so: that is a netctl bug (the
// command dials libvirt too late), and the user can run netctl-full.
func handOver(exec func() error) error {
	var did []string
	if outputWritten.Load() {
		did = append(did, "had written output")
	}
	if stdinRead.Load() {
		did = append(did, "had read stdin")
	}
	if len(did) > 0 {
		return fmt.Errorf("netctl bug: this command needs libvirt's client, which this netctl leaves out and runs %s for, but it %s, so %s cannot take over: run %s with the same arguments instead, and report this",
			fullName, strings.Join(did, " and "), fullName, fullName)
	}
	return exec()
}

// handOverNow is for a command that may first dial libvirt after it has
// printed (netctl stats --watch meeting a NIC attached through libvirt
// later): in a netctl without libvirt's client it runs netctl-full at
// once, while that is transparent; elsewhere it does nothing.
func handOverNow() error {
	if libvirtdom.Linked() || libvirtdom.Unlinked == nil {
		return nil
	}
	return libvirtdom.Unlinked()
}
