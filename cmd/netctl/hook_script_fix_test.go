package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netctl/netctl/hook"
	"github.com/netctl/netctl/state"
)

// TestReviewInstalledRunDirAnyPath: hook status must read the run dir the
// installed script passes, whatever the binary, config and run-dir paths
// hold (quotes, spaces, '$', a newline, the text " --run-dir '"), and
// install must take its own script for netctl's when run again. Before
// the fix installedRunDir cut at the first " --run-dir '" anywhere (in
// the binary's or the config's path too) and isHookScript refused a
// script with a newline in a path (status read $NETCTL_RUN_DIR, a second
// install refused "not netctl's hook script").
func TestReviewInstalledRunDirAnyPath(t *testing.T) {
	for _, c := range []struct{ bin, config, run string }{
		{"/opt/x --run-dir '/y/netctl", "/etc/a --run-dir 'b/hook.json", "/run/it's $HOME"},
		{"/opt/new\nline/netctl", "", "/run/net\nctl"},
		{"/usr/sbin/netctl", "/etc/n'c.json", ""},
	} {
		hooks := t.TempDir()
		s := hookScript(c.bin, hookSettings{config: c.config, runDir: c.run})
		if err := os.MkdirAll(filepath.Join(hooks, "qemu.d"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(hooks, "qemu.d", hookScriptName), []byte(s), 0o755); err != nil {
			t.Fatal(err)
		}
		t.Setenv("NETCTL_RUN_DIR", "/elsewhere")
		want := c.run
		if want == "" {
			want = state.DefaultDir
		}
		if got := installedRunDir(hooks); got != want {
			t.Errorf("script %q: installedRunDir %q, want %q", s, got, want)
		}
		if !isHookScript([]byte(s)) {
			t.Errorf("script %q is not taken for netctl's", s)
		}
	}
	for _, s := range []string{
		"#!/bin/sh\nexec '/usr/sbin/netctl' hook qemu -- \"$@\"\nrm -rf /\n",
		"#!/bin/sh\nexec '/usr/sbin/netctl' hook qemu; rm -rf / -- \"$@\"\n",
		"#!/bin/sh\nexec '/usr/sbin/netctl' hook qemu --run-dir '/x' '/y' -- \"$@\"\n",
		"#!/bin/sh\nexec '/usr/sbin/netctl' hook qemu --run-dir '/x -- \"$@\"\n",
	} {
		if isHookScript([]byte(s)) {
			t.Errorf("%q taken for netctl's hook script", s)
		}
	}
}

// TestReviewDomainNamedHelp: libvirt allows a domain named "help" or "h";
// the hook must take it for a name like any other. Before the fix
// urfave/cli took it for its help command of 'hook qemu' after --: exit 2
// ("no help topic for 'prepare'") on every operation, so such a domain
// could not start, migrate in or be released.
func TestReviewDomainNamedHelp(t *testing.T) {
	run := t.TempDir()
	for _, dom := range []string{"help", "h", "version", "qemu", "install", "status"} {
		for _, op := range [][2]string{{"prepare", "begin"}, {"started", "begin"}, {"release", "end"}, {"migrate", "begin"}} {
			args := []string{"netctl", "hook", "qemu", "--config", filepath.Join(run, "none.json"), "--run-dir", run, "--", dom, op[0], op[1], "-"}
			var stdout, stderr bytes.Buffer
			app := newApp()
			app.Writer, app.ErrWriter = &stdout, &stderr
			if err := app.Run(args); err != nil || stdout.Len() != 0 {
				t.Errorf("%q: %v; stdout %q stderr %q", args, err, stdout.String(), stderr.String())
			}
		}
	}
}

// TestReviewStatusSaysNoOwner: hook taps have no owner by default
// (hook.NoOwner, -1 in the record); hook status says so instead of
// printing "owner -1". Before the fix it printed "owner -1".
func TestReviewStatusSaysNoOwner(t *testing.T) {
	run := t.TempDir()
	st, err := state.Open(run)
	if err != nil {
		t.Fatal(err)
	}
	rec := &state.Domain{Schema: state.DomainSchema, Name: "web1", Status: state.DomainStarted,
		Taps: []state.HookTap{{Link: state.Link{Name: "vm1tap0", Ifindex: 7, Created: true}, Queues: 2, Owner: hook.NoOwner},
			{Link: state.Link{Name: "vm1tap1", Ifindex: 8, Created: true}, Queues: 1, Owner: 107}}}
	if err := st.SaveDomain(rec); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	app := newApp()
	app.Writer, app.ErrWriter = &stdout, &stderr
	if err := app.Run([]string{"netctl", "hook", "status", "--run-dir", run}); err != nil {
		t.Fatal(err)
	}
	out := stdout.String()
	if strings.Contains(out, "owner -1") || !strings.Contains(out, "no owner") || !strings.Contains(out, "owner 107") {
		t.Errorf("hook status:\n%s", out)
	}
}
