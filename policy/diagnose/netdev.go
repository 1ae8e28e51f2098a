package diagnose

import (
	"fmt"
	"strings"
)

// maxInfoNetwork bounds the "info network" text ParseInfoNetwork reads; a
// QEMU with a few dozen NICs prints a few KiB.
const maxInfoNetwork = 1 << 20

// maxNetdevOptions bounds the options of one netdev line: a tap netdev has
// about a dozen (fd, fds, vhostfds, ifname, script, queues, ...).
const maxNetdevOptions = 256

// ParseInfoNetwork finds netdev id in QEMU's "info network" text (QMP
// has no query for netdevs before QEMU 9) and returns its type and
// options. A netdev line looks like
//
//	\ n0: index=0,type=tap,ifname=vnet0,script=no,downscript=no
//
// The text comes from QEMU and is treated as untrusted: over 1 MiB, or a
// line with more than 256 options, is an error that wraps ErrInvalid; an
// id that is not there is an error too.
func ParseInfoNetwork(out, id string) (Netdev, error) {
	if len(out) > maxInfoNetwork {
		return Netdev{}, fmt.Errorf("info network printed %d bytes (at most %d): %w", len(out), maxInfoNetwork, ErrInvalid)
	}
	if id == "" || strings.ContainsAny(id, "\r\n") {
		return Netdev{}, fmt.Errorf("netdev id %q is empty or spans lines: %w", id, ErrInvalid)
	}
	for line := range strings.SplitSeq(out, "\n") {
		line = strings.TrimSuffix(line, "\r")
		rest, ok := strings.CutPrefix(strings.TrimLeft(line, ` \`), id+": ")
		if !ok {
			continue
		}
		if n := strings.Count(rest, ",") + 1; n > maxNetdevOptions {
			return Netdev{}, fmt.Errorf("netdev %s has %d options in info network (at most %d): %w", id, n, maxNetdevOptions, ErrInvalid)
		}
		nd := Netdev{ID: id, Options: map[string]string{}}
		for kv := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "type":
				nd.Type = v
			case "index", "":
			default:
				nd.Options[k] = v
			}
		}
		return nd, nil
	}
	return Netdev{}, fmt.Errorf("netdev %s is not in info network", id)
}
