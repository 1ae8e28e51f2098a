package policy

import (
	"strconv"
	"strings"
)

// versionAtLeast compares dotted versions ("7.2.22" >= "8.2"); known is
// false when have is empty or does not parse.
func versionAtLeast(have, min string) (ok, known bool) {
	h, okh := parseVersion(have)
	m, okm := parseVersion(min)
	if !okh || !okm {
		return false, false
	}
	for i := range 3 {
		if h[i] != m[i] {
			return h[i] > m[i], true
		}
	}
	return true, true
}

// parseVersion reads MAJOR.MINOR[.MICRO], each part 1 to 6
// decimal digits (no sign, no spaces), as QEMU prints it.
func parseVersion(s string) ([3]int, bool) {
	var v [3]int
	parts := strings.Split(s, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return v, false
	}
	for i, p := range parts {
		if p == "" || len(p) > 6 || strings.Trim(p, "0123456789") != "" {
			return v, false
		}
		n, err := strconv.Atoi(p)
		if err != nil {
			return v, false
		}
		v[i] = n
	}
	return v, true
}

// QEMUHasProp says whether QEMU version (as QEMU prints it, "7.2.22")
// has virtio-net property prop, for the properties a plan sets: known is
// false for a version that does not parse. A property netctl does not
// manage is had (netctl knows no version for it).
func QEMUHasProp(version, prop string) (has, known bool) {
	for _, m := range managed {
		if m.prop != prop {
			continue
		}
		if m.qemu == "" {
			return true, true
		}
		return versionAtLeast(version, m.qemu)
	}
	return true, true
}
