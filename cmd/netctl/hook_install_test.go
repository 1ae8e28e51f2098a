package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netctl/netctl/hook"
	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/state"
)

// TestInstallHookKeepsOthersScript: qemu.d/50-netctl that is not a
// netctl hook script (an operator's own, under the name) is not
// replaced: install refuses with what to do and leaves it as it was,
// and the operator's /etc/libvirt/hooks/qemu dispatcher is never
// touched. A netctl script for another binary is replaced (a moved
// netctl), an identical one left as is.
func TestInstallHookKeepsOthersScript(t *testing.T) {
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	qemu := filepath.Join(dir, "qemu")
	os.WriteFile(qemu, []byte("#!/bin/sh\n/usr/local/bin/site-hook \"$@\"\n"), 0o755)
	qd := filepath.Join(dir, "qemu.d")
	os.Mkdir(qd, 0o755)
	p := filepath.Join(qd, hookScriptName)
	theirs := "#!/bin/sh\n# site's own hook\nexit 0\n"
	os.WriteFile(p, []byte(theirs), 0o755)

	if _, _, err := installHook(dir, bin, hookSettings{}); !errors.Is(err, errs.ErrConflict) || !strings.Contains(err.Error(), "not netctl's") {
		t.Errorf("install over another script: %v; want a refusal wrapping ErrConflict", err)
	}
	if b, _ := os.ReadFile(p); string(b) != theirs {
		t.Errorf("%s now holds %q", p, b)
	}

	os.WriteFile(p, []byte(hookScript("/opt/old/netctl", hookSettings{})), 0o755)
	if _, changed, err := installHook(dir, bin, hookSettings{}); err != nil || !changed {
		t.Errorf("install over netctl's script for another binary: changed %v, %v", changed, err)
	}
	if _, changed, err := installHook(dir, bin, hookSettings{}); err != nil || changed {
		t.Errorf("second install: changed %v, %v", changed, err)
	}
	if b, _ := os.ReadFile(qemu); string(b) != "#!/bin/sh\n/usr/local/bin/site-hook \"$@\"\n" {
		t.Errorf("the qemu dispatcher now holds %q", b)
	}
	if ents, _ := os.ReadDir(qd); len(ents) != 1 {
		t.Errorf("qemu.d holds %v; want only %s", ents, hookScriptName)
	}
}

// TestInstallHookRefusesUntrustedBinary: libvirtd runs the hook as root
// at every domain start, so install refuses a binary that someone other
// than root could replace or rewrite: one others can write, one of
// another user, one in a directory others can write (without the sticky
// bit) or own. Nothing is written.
func TestInstallHookRefusesUntrustedBinary(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test chowns files to nobody: run it as root (make test does)")
	}
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	mk := func(dirMode, binMode os.FileMode, dirOwner, binOwner int) string {
		base := t.TempDir()
		d := filepath.Join(base, "bin")
		os.Mkdir(d, 0o755)
		b := filepath.Join(d, "netctl")
		if err := os.WriteFile(b, self[:min(len(self), 4096)], 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chmod(b, binMode)
		os.Chmod(d, dirMode)
		os.Chown(b, binOwner, -1)
		os.Chown(d, dirOwner, -1)
		return b
	}
	const nobody = 65534
	cases := map[string]string{
		"world-writable binary":     mk(0o755, 0o777, 0, 0),
		"group-writable binary":     mk(0o755, 0o775, 0, 0),
		"binary of nobody":          mk(0o755, 0o755, 0, nobody),
		"world-writable directory":  mk(0o777, 0o755, 0, 0),
		"directory of nobody":       mk(0o755, 0o755, nobody, 0),
		"nobody's, in a 0777 dir":   mk(0o777, 0o777, nobody, nobody),
		"sticky dir, nobody's file": mk(0o1777, 0o755, 0, nobody),
	}
	for name, bin := range cases {
		t.Run(name, func(t *testing.T) {
			hooks := t.TempDir()
			_, _, err := installHook(hooks, bin, hookSettings{})
			if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "the hook as root") {
				t.Errorf("install of %s: %v; want a refusal that says why", bin, err)
			}
			if _, err := os.Stat(filepath.Join(hooks, "qemu.d", hookScriptName)); err == nil {
				t.Errorf("a script was written")
			}
		})
	}
	good := mk(0o755, 0o755, 0, 0)
	if _, _, err := installHook(t.TempDir(), good, hookSettings{}); err != nil {
		t.Errorf("install of root's 0755 binary: %v", err)
	}
}

// TestHookScriptArgs: the script passes -- before libvirt's arguments
// (a domain named -x or --help is not a flag) and the settings install
// was given (libvirt runs hooks with a filtered environment, so
// NETCTL_RUN_DIR and NETCTL_HOOK_CONFIG never reach them); the running
// netctl parses them back whatever the domain's name.
func TestHookScriptArgs(t *testing.T) {
	s := hookScript("/usr/sbin/net'ctl", hookSettings{config: "/etc/x/hook.json", runDir: "/run/x y"})
	want := "#!/bin/sh\nexec '/usr/sbin/net'\\''ctl' hook qemu --config '/etc/x/hook.json' --run-dir '/run/x y' -- \"$@\"\n"
	if s != want {
		t.Errorf("script\n%q\nwant\n%q", s, want)
	}
	if !isHookScript([]byte(s)) || !isHookScript([]byte("#!/bin/sh\nexec '/usr/bin/netctl' hook qemu \"$@\"\n")) {
		t.Errorf("install does not know its own scripts (new and old form)")
	}
	if s := hookScript("/usr/sbin/netctl", hookSettings{config: hookDefaultConfig, runDir: ""}); s != "#!/bin/sh\nexec '/usr/sbin/netctl' hook qemu -- \"$@\"\n" {
		t.Errorf("defaults written out: %q", s)
	}
	run := t.TempDir()
	for _, dom := range []string{"-x", "--help", "-h", "--config", "--", "-"} {
		for _, op := range [][2]string{{"stopped", "end"}, {"release", "end"}, {"migrate", "begin"}} {
			args := []string{"netctl", "hook", "qemu", "--run-dir", run, "--", dom, op[0], op[1], "-"}
			var stdout, stderr bytes.Buffer
			app := newApp()
			app.Writer, app.ErrWriter = &stdout, &stderr
			if err := app.Run(args); err != nil || stdout.Len() != 0 {
				t.Errorf("%q: %v; stdout %q stderr %q", args, err, stdout.String(), stderr.String())
			}
		}
	}
}

// TestHookStatusReadsInstalledRunDir: hook status reads the records where
// the installed hook writes them (the script's --run-dir), not where the
// environment of the shell that runs status points.
func TestHookStatusReadsInstalledRunDir(t *testing.T) {
	hooks, run := t.TempDir(), filepath.Join(t.TempDir(), "it's run")
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := installHook(hooks, bin, hookSettings{runDir: run}); err != nil {
		t.Fatal(err)
	}
	if got := installedRunDir(hooks); got != run {
		t.Errorf("installedRunDir %q, want %q", got, run)
	}
	t.Setenv("NETCTL_RUN_DIR", filepath.Join(t.TempDir(), "elsewhere"))
	if got := installedRunDir(hooks); got != run {
		t.Errorf("with NETCTL_RUN_DIR set: installedRunDir %q, want the script's %q", got, run)
	}
	if _, _, err := installHook(hooks, bin, hookSettings{}); err != nil {
		t.Fatal(err)
	}
	if got := installedRunDir(hooks); got != state.DefaultDir {
		t.Errorf("a script without --run-dir: %q, want %s", got, state.DefaultDir)
	}
}

// TestHookDefaultRunDirTrusted: without --run-dir (the installed script
// passes none for the default) the hook keeps its records in
// /run/netctl, and the run dir check takes that default, not "" (which
// it refused as a relative path: every managed domain failed to start on
// a real libvirtd, TestHostLibvirtdNetctlHook).
func TestHookDefaultRunDirTrusted(t *testing.T) {
	if got := (hookSettings{}).runDirOrDefault(); got != state.DefaultDir {
		t.Fatalf("default run dir %q, want %s", got, state.DefaultDir)
	}
	if err := hook.CheckTrustedDir((hookSettings{}).runDirOrDefault()); err != nil {
		t.Errorf("the default run dir is refused: %v", err)
	}
	if err := hook.CheckTrustedDir(""); err == nil {
		t.Errorf("an empty run dir is taken")
	}
}
