package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestEveryCommandHasAnExample: every visible command's --help ends in
// an example (the examples table names no command that is not there),
// and each example names its own command, or one below it, with flags
// that command or its parents really have.
func TestEveryCommandHasAnExample(t *testing.T) {
	app := newApp()
	seen := map[string]bool{}
	var walk func(path string, cs []*cli.Command, flags []cli.Flag)
	walk = func(path string, cs []*cli.Command, flags []cli.Flag) {
		for _, c := range cs {
			if c.Hidden || c.Name == "help" {
				continue
			}
			p := path + " " + c.Name
			seen[p] = true
			if _, ok := examples[p]; !ok {
				t.Errorf("%s has no example: add one to examples (examples.go)", p)
			} else if !strings.Contains(c.Description, "Example:\n   "+examples[p]) {
				t.Errorf("%s --help does not end with its example", p)
			}
			walk(p, c.Subcommands, append(slices.Clone(flags), c.Flags...))
		}
	}
	walk("netctl", app.Commands, app.Flags)
	for p, ex := range examples {
		if !seen[p] {
			t.Errorf("examples names %q, which is no command", p)
			continue
		}
		if i := strings.Index(ex, "netctl "); i > 0 {
			ex = ex[i:] // after the environment it sets
		}
		if !strings.HasPrefix(ex, "netctl ") {
			t.Errorf("%s: example %q does not start with netctl", p, ex)
			continue
		}
		// Follow the words down the command tree, collecting the flags
		// each level has, then check every --flag against them.
		cmds, flags := app.Commands, append([]cli.Flag(nil), app.Flags...)
		words := strings.Fields(ex)[1:]
		var path []string
		for _, w := range words {
			if strings.HasPrefix(w, "-") {
				name := strings.TrimLeft(w, "-")
				name, _, _ = strings.Cut(name, "=")
				if name == "" { // "--" ends the flags
					break
				}
				if !slices.ContainsFunc(flags, func(f cli.Flag) bool { return slices.Contains(f.Names(), name) }) {
					t.Errorf("%s: example %q: netctl %s has no flag %s", p, ex, strings.Join(path, " "), w)
				}
				continue
			}
			i := slices.IndexFunc(cmds, func(c *cli.Command) bool { return c.Name == w })
			if i < 0 {
				continue // an argument or a flag's value
			}
			path = append(path, w)
			flags = append(flags, cmds[i].Flags...)
			cmds = cmds[i].Subcommands
		}
		if got := "netctl " + strings.Join(path, " "); !strings.HasPrefix(got, p) {
			t.Errorf("%s: example %q runs %s", p, ex, got)
		}
	}
}
