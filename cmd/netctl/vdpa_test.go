package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/netctl/netctl/internal/errs"
)

// TestVDPAAddRefusesOutOfRange: values that used to be truncated to 16
// bits are refused with the valid range, as a usage error (ErrInvalid),
// before any netlink call.
func TestVDPAAddRefusesOutOfRange(t *testing.T) {
	base := []string{"vdpa", "dev", "add", "--name", "v0", "--mgmtdev", "vduse"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--mtu", "70000"}, "--mtu 70000: out of range 68..65535"},
		{[]string{"--mtu", "67"}, "--mtu 67: out of range 68..65535"},
		{[]string{"--mtu", "0"}, "--mtu 0: out of range 68..65535"},
		{[]string{"--max-vqp", "65536"}, "--max-vqp 65536: out of range 1..32768"},
		{[]string{"--max-vqp", "32769"}, "--max-vqp 32769: out of range 1..32768"},
		{[]string{"--max-vqp", "0"}, "--max-vqp 0: out of range 1..32768"},
		{[]string{"--mac", "02:00:00:00:00:01:02:03"}, "--mac"},
		{[]string{"--mac", "nonsense"}, "--mac"},
	} {
		_, err := runNetctl(append(append([]string{}, base...), tc.args...)...)
		if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), tc.want) || strings.HasSuffix(err.Error(), ": invalid argument") {
			t.Errorf("%v: %v, want ErrInvalid saying %q (and not ending in the sentinel's text)", tc.args, err, tc.want)
		}
	}
	for _, args := range [][]string{
		{"vdpa", "--timeout", "0s", "dev", "show"},
		{"vdpa", "dev", "vstats", "v0", "4294967296"},
		{"vdpa", "dev", "vstats", "v0", "-1"},
		{"vdpa", "dev", "del"},
	} {
		if _, err := runNetctl(args...); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("%v: %v, want ErrInvalid", args, err)
		}
	}
}
