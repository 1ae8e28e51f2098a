package hook

import (
	"fmt"
	"os/user"
	"strconv"
	"strings"

	"github.com/netctl/netctl/internal/errs"
)

// lookupUser turns "qemu", "107" or "+107" into a uid.
func lookupUser(s string) (int, error) {
	n := strings.TrimPrefix(s, "+")
	if id, err := strconv.ParseUint(n, 10, 31); err == nil {
		return int(id), nil
	}
	if strings.HasPrefix(s, "+") || len(s) > 64 || s == "" {
		return 0, fmt.Errorf("user %.64q: use a user name or a number: %w", s, errs.ErrInvalid)
	}
	u, err := user.Lookup(s)
	if err != nil {
		return 0, fmt.Errorf("user %.64q: %v: create the user or name another: %w", s, err, errs.ErrInvalid)
	}
	id, err := strconv.ParseUint(u.Uid, 10, 31)
	if err != nil {
		return 0, fmt.Errorf("user %.64q has uid %.16q: %w", s, u.Uid, errs.ErrInvalid)
	}
	return int(id), nil
}

// dacUser is the user part of a DAC label ("+107:+107", "qemu:kvm").
func dacUser(label string) string {
	u, _, _ := strings.Cut(label, ":")
	return u
}
