package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestPrunedTreeWalk: every command path of the whole tree, with calls
// that reach no action (help in every form, a bad flag, a stray "help"
// argument), gives the same from the pruned tree as from the whole tree.
func TestPrunedTreeWalk(t *testing.T) {
	var paths [][]string
	var walk func(prefix []string, cmds []*cli.Command)
	walk = func(prefix []string, cmds []*cli.Command) {
		for _, c := range cmds {
			p := append(append([]string{}, prefix...), c.Name)
			paths = append(paths, p)
			walk(p, c.Subcommands)
		}
	}
	var top []*cli.Command
	for _, c := range commands() {
		if c.name != "gendoc" {
			top = append(top, c.build())
		}
	}
	walk([]string{"netctl"}, top)
	others := []string{"attach", "vm", "version", "help", "h", "nosuch"}
	n, bad := 0, 0
	for _, p := range paths {
		var calls [][]string
		add := func(extra ...string) { calls = append(calls, append(append([]string{}, p...), extra...)) }
		add("--help")
		add("-h")
		add("help")
		add("h")
		add("--bogus")
		for _, o := range others {
			add("--help", o)
			add("help", o)
		}
		for _, args := range calls {
			if p[len(p)-1] == "qemu" && (args[len(p)] == "help" || args[len(p)] == "h") {
				continue // hook qemu takes "help" as a domain name: runs the hook
			}
			var o1, e1, o2, e2 bytes.Buffer
			code1 := runApp(newAppFor(args), args, &o1, &e1)
			code2 := runApp(newApp(), args, &o2, &e2)
			n++
			if code1 != code2 || o1.String() != o2.String() || e1.String() != e2.String() {
				bad++
				t.Errorf("%s: pruned %d %.80q %q; whole %d %.80q %q", strings.Join(args, " "), code1, o1.String(), e1.String(), code2, o2.String(), e2.String())
			}
		}
	}
	t.Logf("%d calls, %d differ", n, bad)
}
