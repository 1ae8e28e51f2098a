package main

import (
	"bytes"
	"testing"
)

// TestCommandTable: each entry of commands() builds the command it names,
// and a call that names a command gets from the tree built for it alone
// what the whole tree gives: the same output, errors and exit code.
func TestCommandTable(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range commands() {
		if got := c.build().Name; got != c.name {
			t.Errorf("commands(): entry %q builds %q", c.name, got)
		}
		if seen[c.name] {
			t.Errorf("commands(): %q twice", c.name)
		}
		seen[c.name] = true
		if c.name == "gendoc" {
			continue // writes files
		}
		// Nothing that reaches a command's action: --help, a bad flag, and
		// a group command (vdpa, vm, ...) without its subcommand.
		calls := [][]string{{"netctl", c.name, "--help"}, {"netctl", c.name, "--no-such-flag"}}
		if len(c.build().Subcommands) > 0 {
			calls = append(calls, []string{"netctl", c.name}, []string{"netctl", c.name, "no-such-command"})
		}
		for _, args := range calls {
			var o1, e1, o2, e2 bytes.Buffer
			code1 := runApp(newAppFor(args), args, &o1, &e1)
			code2 := runApp(newApp(), args, &o2, &e2)
			if code1 != code2 || o1.String() != o2.String() || e1.String() != e2.String() {
				t.Errorf("%v: the tree built for it gives %d %q %q, the whole tree %d %q %q",
					args, code1, o1.String(), e1.String(), code2, o2.String(), e2.String())
			}
		}
	}
	if app := newAppFor([]string{"netctl", "attach", "--qmp", "x"}); len(app.Commands) > 2 { // attach and help
		t.Errorf("netctl attach built %d commands", len(app.Commands))
	}
	for _, args := range [][]string{{"netctl"}, {"netctl", "--help"}, {"netctl", "help", "attach"}, {"netctl", "hook", "qemu", "--help", "attach"}, {"netctl", "vdpa", "h"}, {"netctl", "Attach"}} {
		if app := newAppFor(args); len(app.Commands) < len(commands()) {
			t.Errorf("%v built %d commands, want the whole tree", args, len(app.Commands))
		}
	}
}
