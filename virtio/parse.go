package virtio

import (
	"fmt"
	"strings"

	"github.com/netctl/netctl/internal/errs"
)

// ErrInvalid is wrapped by ParseFeatures' errors (the same value as the
// other packages' ErrInvalid).
var ErrInvalid = errs.ErrInvalid

// maxNameLen bounds a name ParseFeature looks at: the longest spelling,
// "VIRTIO_NET_F_CTRL_GUEST_OFFLOADS", has 32 bytes.
const maxNameLen = 64

// bitPrefixes are the header prefixes ParseFeature accepts (at most one).
var bitPrefixes = []string{"VIRTIO_NET_F_", "VIRTIO_RING_F_", "VIRTIO_F_", "VHOST_F_"}

// ParseFeature returns the bit named name: a name as BitName prints it,
// case-insensitive (ASCII), with or without one VIRTIO_NET_F_, VIRTIO_F_,
// VIRTIO_RING_F_ or VHOST_F_ prefix, or "bit N" (N from 0 to 63, decimal,
// as BitName prints it). Any other input, including names over 64 bytes,
// gives false.
func ParseFeature(name string) (Features, bool) {
	n := strings.TrimSpace(name)
	if len(n) > maxNameLen {
		return 0, false
	}
	var up [maxNameLen]byte
	for i := 0; i < len(n); i++ {
		c := n[i]
		if c >= 0x80 {
			return 0, false // no Unicode case folding: "ſ" is not "S"
		}
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		up[i] = c
	}
	n = string(up[:len(n)])
	if rest, ok := strings.CutPrefix(n, "BIT "); ok {
		b, ok := parseBitNumber(rest)
		if !ok {
			return 0, false
		}
		return Bit(b), true
	}
	for _, p := range bitPrefixes {
		if rest, ok := strings.CutPrefix(n, p); ok {
			n = rest
			break
		}
	}
	for i, s := range names {
		if s != "" && s == n {
			return Bit(uint(i)), true
		}
	}
	return 0, false
}

// parseBitNumber parses N of "bit N": 0 to 63, decimal digits only, no
// sign and no leading zero (the way BitName prints it).
func parseBitNumber(s string) (uint, bool) {
	if len(s) == 0 || len(s) > 2 || (len(s) == 2 && s[0] == '0') {
		return 0, false
	}
	n := uint(0)
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + uint(s[i]-'0')
	}
	return n, n < 64
}

// maxWordLen bounds the text ParseFeatures reads: every bit by its
// longest name joined with "|" takes under 1 KiB.
const maxWordLen = 4096

// ParseFeatures is the inverse of Features.String: "0", or names that
// ParseFeature takes joined with "|" ("CSUM|GUEST_TSO4|bit 58"). An empty
// name, an unknown name or text over 4 KiB is an error that wraps
// ErrInvalid and names the problem.
func ParseFeatures(s string) (Features, error) {
	if len(s) > maxWordLen {
		return 0, fmt.Errorf("virtio: a feature list of %d bytes is too long (at most %d): %w", len(s), maxWordLen, ErrInvalid)
	}
	if strings.TrimSpace(s) == "0" {
		return 0, nil
	}
	var f Features
	for name := range strings.SplitSeq(s, "|") {
		b, ok := ParseFeature(name)
		if !ok {
			return 0, fmt.Errorf("virtio: %q is not a feature name (names as in virtio_net.h without VIRTIO_NET_F_, e.g. GUEST_TSO4, "+
				"or \"bit N\" with N from 0 to 63): %w", name, ErrInvalid)
		}
		f |= b
	}
	return f, nil
}
