package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netctl/netctl/internal/gendoc"
)

// repoRoot is the repository's root, from cmd/netctl.
const repoRoot = "../.."

// TestDocsCurrent regenerates the man pages and completion into a temp
// dir (as "make docs" does) and fails when the checked-in ones differ.
func TestDocsCurrent(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	if code := runMain([]string{"netctl", "gendoc", "--dir", dir}, &out, &out); code != 0 {
		t.Fatalf("netctl gendoc: exit %d: %s", code, out.String())
	}
	files, err := gendoc.Generate(newApp())
	if err != nil {
		t.Fatal(err)
	}
	var stale []string
	for _, name := range files.Names() {
		want, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("gendoc did not write %s: %v", name, err)
		}
		got, err := os.ReadFile(filepath.Join(repoRoot, name))
		if err != nil || !bytes.Equal(got, want) {
			stale = append(stale, name)
		}
	}
	extra, err := files.Stale(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	stale = append(stale, extra...)
	if len(stale) > 0 {
		t.Fatalf("the man pages and completion are not current with the command tree: %s: run make docs and commit them",
			strings.Join(stale, ", "))
	}
}

// TestManPages: netctl.1 and one page per visible top-level command,
// each rendered by groff without a warning.
func TestManPages(t *testing.T) {
	files, err := gendoc.Generate(newApp())
	if err != nil {
		t.Fatal(err)
	}
	app := newApp()
	want := []string{"docs/man/netctl.1"}
	for _, c := range app.Commands {
		if !c.Hidden && c.Name != "help" {
			want = append(want, "docs/man/netctl-"+c.Name+".1")
		}
	}
	for _, w := range want {
		if files[w] == nil {
			t.Errorf("no page %s", w)
		}
	}
	for _, hidden := range []string{"docs/man/netctl-gendoc.1", "docs/man/netctl-help.1"} {
		if files[hidden] != nil {
			t.Errorf("page %s of a hidden command", hidden)
		}
	}
	if !strings.Contains(string(files["docs/man/netctl-attach.1"]), `\fB\-\-backend\fR`) {
		t.Errorf("netctl-attach.1 lacks --backend:\n%s", files["docs/man/netctl-attach.1"])
	}
	groff, err := exec.LookPath("groff")
	if err != nil {
		t.Log("no groff: pages not rendered")
		return
	}
	for _, name := range want {
		cmd := exec.Command(groff, "-man", "-ww", "-z")
		cmd.Stdin = bytes.NewReader(files[name])
		cmd.Env = append(os.Environ(), "LC_ALL=C.UTF-8")
		out, err := cmd.CombinedOutput()
		if err != nil || len(out) > 0 {
			t.Errorf("groff -man -ww %s: %v: %s", name, err, out)
		}
	}
}

// TestBashCompletion runs the generated bash completion in bash.
func TestBashCompletion(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		if os.Getenv("NETCTL_VM_DEPS") != "" {
			t.Fatalf("bash missing under make test: %v", err)
		}
		t.Skip("no bash")
	}
	files, err := gendoc.Generate(newApp())
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "netctl.bash")
	if err := os.WriteFile(script, files[gendoc.BashFile], 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		words []string
		want  string
	}{
		{[]string{"netctl", "at"}, "attach"},
		{[]string{"netctl", "vdpa", ""}, "mgmtdev dev"},
		{[]string{"netctl", "vdpa", "dev", ""}, "show add del config vstats"},
		{[]string{"netctl", "attach", "--bac"}, "--backend"},
		{[]string{"netctl", "attach", "--backend", ""}, "auto vdpa vhost-net userspace"},
		{[]string{"netctl", "attach", "--vm", "x", "--backend", "v"}, "vdpa vhost-net"},
		{[]string{"netctl", "attach", "--json", "--prof"}, "--profile"},
		{[]string{"netctl", "--ver"}, "--version"},
		{[]string{"netctl", "gen"}, ""}, // hidden
		{[]string{"netctl", "hook", "st"}, "status"},
		{[]string{"netctl", "exporter", "--listen", "x", "--allow"}, "--allow-remote"},
	} {
		prog := `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); _netctl; echo "${COMPREPLY[*]}"`
		cmd := exec.Command(bash, append([]string{"--norc", "-c", prog, "bash", script}, tc.words...)...)
		cmd.Env = append(os.Environ(), "PATH=/nonexistent") // no netctl to ask
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v: %s", tc.words, err, out)
		}
		if got := strings.TrimSpace(string(out)); got != tc.want {
			t.Errorf("completing %q: got %q, want %q", tc.words, got, tc.want)
		}
	}
	// Values asked of netctl: VM names (vm list -j, list -j) and NIC ids
	// (list -j), from a stand-in netctl on PATH.
	fake := t.TempDir()
	stub := "#!/bin/sh\ncase \"$*\" in\n" +
		"'vm list -j') echo '{\"vms\": [{\"pid\": 7, \"name\": \"web1\", \"monitors\": []}]}' ;;\n" +
		"'list -j') echo '[{\"vm\": \"db2\", \"id\": \"net0\"}, {\"vm\": \"web1\", \"id\": \"net1\"}]' ;;\nesac\n"
	if err := os.WriteFile(filepath.Join(fake, "netctl"), []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		words []string
		want  string
	}{
		{[]string{"netctl", "attach", "--vm", ""}, "db2 web1"},
		{[]string{"netctl", "detach", "--vm", "web1", "--id", "net"}, "net0 net1"},
	} {
		prog := `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); _netctl; echo "${COMPREPLY[*]}"`
		cmd := exec.Command(bash, append([]string{"--norc", "-c", prog, "bash", script}, tc.words...)...)
		cmd.Env = append(os.Environ(), "PATH="+fake+":/usr/bin:/bin")
		out, err := cmd.CombinedOutput()
		if got := strings.TrimSpace(string(out)); err != nil || got != tc.want {
			t.Errorf("completing %q: got %q (%v), want %q", tc.words, got, err, tc.want)
		}
	}
	if zsh, err := exec.LookPath("zsh"); err == nil {
		zf := filepath.Join(t.TempDir(), "_netctl")
		if err := os.WriteFile(zf, files[gendoc.ZshFile], 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(zsh, "-n", zf).CombinedOutput(); err != nil {
			t.Errorf("zsh -n _netctl: %v: %s", err, out)
		}
		// compadd and _files work only inside a completion widget: these
		// stand-ins print what they were given (the count of candidates
		// first; zsh filters by the prefix itself).
		prog := `compadd() { [[ $1 == -- ]] && shift; print -r -- "$# $*"; }; _files() { print -r -- "files $*"; }; compdef() { :; }
source "$1"; shift; words=("$@"); CURRENT=$#; _netctl`
		for _, tc := range []struct {
			words []string
			want  string
		}{
			{[]string{"netctl", "vdpa", "dev", ""}, "5 show add del config vstats"},
			{[]string{"netctl", "attach", "--backend", ""}, "4 auto vdpa vhost-net userspace"},
			{[]string{"netctl", "attach", "--vm", "x", "--qmp", ""}, "files"},
			{[]string{"netctl", "plan", ""}, "files"},
		} {
			cmd := exec.Command(zsh, append([]string{"-f", "-c", prog, "zsh", zf}, tc.words...)...)
			cmd.Env = append(os.Environ(), "PATH=/nonexistent:/usr/bin:/bin")
			out, err := cmd.CombinedOutput()
			if got := strings.TrimSpace(string(out)); err != nil || got != tc.want {
				t.Errorf("zsh completing %q: got %q (%v), want %q", tc.words, got, err, tc.want)
			}
		}
	} else {
		t.Log("no zsh: its completion is not run")
	}
}
