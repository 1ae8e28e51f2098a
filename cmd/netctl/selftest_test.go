package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/netctl/netctl/internal/errs"
)

// TestSelftestRefusesBadFlags: out-of-range flags are refused before
// anything runs, with an error that wraps errs.ErrInvalid and names the
// valid range.
func TestSelftestRefusesBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--frames", "-5"}, "--frames -5: invalid argument: use 1 to 100000"},
		{[]string{"--frames", "0"}, "--frames 0: invalid argument: use 1 to 100000"},
		{[]string{"--frames", "100001"}, "use 1 to 100000"},
		{[]string{"--queues", "0"}, "--queues 0: invalid argument: use 1 to 256"},
		{[]string{"--queues", "-1"}, "use 1 to 256"},
		{[]string{"--queues", "257"}, "--queues 257: invalid argument: use 1 to 256"},
		{[]string{"--frame-size", "59"}, "use 60 to 2036"},
		{[]string{"--frame-size", "2037"}, "use 60 to 2036"},
		{[]string{"--timeout", "-1s"}, "use a positive duration"},
		{[]string{"extra"}, `takes no arguments, got "extra"`},
	} {
		app := newApp()
		var out bytes.Buffer
		app.Writer, app.ErrWriter = &out, &out
		err := app.Run(append([]string{"netctl", "selftest"}, c.args...))
		if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("selftest %v: %v, want ErrInvalid saying %q", c.args, err, c.want)
		}
		if out.Len() != 0 {
			t.Errorf("selftest %v printed %q before refusing", c.args, out.String())
		}
	}
}
