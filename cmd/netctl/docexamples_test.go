package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// docCommand is a netctl command line a page shows.
type docCommand struct {
	where string // page:line
	words []string
}

var docCodeSpan = regexp.MustCompile("`(netctl [^`]+)`")

// docCommands are the netctl command lines of a markdown page: lines of
// its code blocks that start with "netctl " or "$ netctl ", and code spans
// that start with "netctl ".
func docCommands(page string, src []byte) []docCommand {
	var out []docCommand
	fence := false
	for i, l := range strings.Split(string(src), "\n") {
		where := page + ":" + strconv.Itoa(i+1)
		trim := strings.TrimSpace(l)
		if strings.HasPrefix(trim, "```") {
			fence = !fence
			continue
		}
		if fence {
			trim = strings.TrimPrefix(trim, "$ ")
			if strings.HasPrefix(trim, "netctl ") {
				out = append(out, docCommand{where, strings.Fields(trim)})
			}
			continue
		}
		for _, m := range docCodeSpan.FindAllStringSubmatch(l, -1) {
			out = append(out, docCommand{where, strings.Fields(m[1])})
		}
	}
	return out
}

// checkDocCommand walks words through the command tree: every word
// before the first argument names a subcommand, and every --flag or -f
// is one of the command's (or a global one). It returns what is wrong.
func checkDocCommand(app *cli.App, words []string) string {
	cmds := app.Commands
	var cmd *cli.Command
	path := "netctl"
	args := false
	for _, w := range words[1:] {
		// The rest is the shell's or prose: a comment, a redirect, a
		// pipe, an ellipsis, a placeholder.
		if strings.HasPrefix(w, "#") || strings.ContainsAny(w, "<>|;") || w == "&&" || strings.Contains(w, "...") || w == "\\" || w == "--" {
			break
		}
		if strings.HasSuffix(w, ":") {
			return "" // netctl's output ("netctl selftest: ..."), not a command line
		}
		if w == strings.ToUpper(w) && strings.ToLower(w) != w {
			args = true // a placeholder: COMMAND, DEV
			continue
		}
		if strings.HasPrefix(w, "-") && len(w) > 1 {
			name := strings.TrimLeft(strings.SplitN(w, "=", 2)[0], "-")
			if !hasDocFlag(app, cmd, name) {
				return path + ": no flag " + w
			}
			continue
		}
		if args || cmds == nil {
			args = true
			continue
		}
		var next *cli.Command
		for _, c := range cmds {
			if c.HasName(w) {
				next = c
			}
		}
		if next == nil {
			if cmd == nil || len(cmd.Subcommands) > 0 && strings.TrimSpace(cmd.ArgsUsage) == "" {
				return path + ": no command " + w
			}
			args = true
			continue
		}
		cmd, cmds, path = next, next.Subcommands, path+" "+w
	}
	return ""
}

func hasDocFlag(app *cli.App, cmd *cli.Command, name string) bool {
	if name == "help" || name == "h" {
		return true
	}
	fs := app.Flags
	if cmd != nil {
		fs = append(append([]cli.Flag{}, cmd.Flags...), app.Flags...)
	}
	for _, f := range fs {
		for _, n := range f.Names() {
			if n == name {
				return true
			}
		}
	}
	return false
}

// notCommands are code spans that start with "netctl " but are not command
// lines: the alias the hook gives its taps.
var notCommands = map[string]bool{"netctl hook tap": true}

// TestDocExamples: every netctl command line the README and docs/*.md
// show names real commands and flags (an example a user copies works).
func TestDocExamples(t *testing.T) {
	app := newApp()
	app.Setup()
	pages, _ := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	pages = append(pages, filepath.Join(repoRoot, "README.md"), filepath.Join(repoRoot, "deploy", "README.md"))
	n := 0
	for _, p := range pages {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(repoRoot, p)
		for _, c := range docCommands(rel, src) {
			n++
			if notCommands[strings.Join(c.words, " ")] {
				continue
			}
			if msg := checkDocCommand(app, c.words); msg != "" {
				t.Errorf("%s: %q: %s", c.where, strings.Join(c.words, " "), msg)
			}
		}
	}
	if n < 20 {
		t.Fatalf("only %d netctl command lines found in %v", n, pages)
	}
}

// TestCheckDocCommand: the checker tells a real command line from one
// with a command or flag netctl does not have.
func TestCheckDocCommand(t *testing.T) {
	app := newApp()
	app.Setup()
	for _, ok := range []string{
		"netctl attach --qmp /run/vm1.qmp --id net1 --queues 2",
		"netctl vdpa mgmtdev show",
		"netctl probe -j > host.json",
		"netctl hook status web1",
		"netctl --version",
	} {
		if msg := checkDocCommand(app, strings.Fields(ok)); msg != "" {
			t.Errorf("%q: %s", ok, msg)
		}
	}
	for _, bad := range []string{"netctl vdpa mgmtdev list", "netctl attach --qeues 2", "netctl atach", "netctl stats --vm a --nope"} {
		if checkDocCommand(app, strings.Fields(bad)) == "" {
			t.Errorf("%q passed", bad)
		}
	}
}
