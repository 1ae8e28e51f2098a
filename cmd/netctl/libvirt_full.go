//go:build !netctl_split

package main

// The full build (netctl-full, go build ./cmd/netctl) speaks libvirt's RPC
// itself. The split netctl leaves the client (go-libvirt, and with it
// golang.org/x/crypto/ssh and crypto/tls) out and runs netctl-full when a
// command reaches libvirtdom.Dial (full_split.go, handover.go).
import _ "github.com/netctl/netctl/libvirtdom/rpc"
