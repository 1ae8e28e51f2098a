package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/netctl/netctl/internal/errs"
)

// netctlBinary builds cmd/netctl into the test's temporary directory, for
// tests that run the real binary.
func netctlBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "netctl")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

type result struct {
	code           int
	stdout, stderr string
}

func execNetctl(t *testing.T, bin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("netctl %v: %v", args, err)
	}
	return result{cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()}
}

// hasStutter finds a layer's context repeated ("selftest: selftest:") or a
// "failed:" wrapper around an error that already says what failed.
func hasStutter(line string) bool {
	parts := strings.Split(line, ": ")
	for i, p := range parts {
		if strings.HasSuffix(p, " failed") || (i > 0 && p == parts[i-1]) {
			return true
		}
	}
	return false
}

// TestExitCodes runs the built binary: exit 0 on success, 1 on failure, 2
// on a usage error; a usage error is one line and a hint on stderr, never
// the help text.
func TestExitCodes(t *testing.T) {
	bin := netctlBinary(t)
	probe := "../../policy/testdata/probe-6.1.json"
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string // in stdout
		stderr string // in stderr
	}{
		{[]string{"help"}, 0, "COMMANDS:", ""},
		{[]string{"help", "plan"}, 0, "HOST.json...", ""},
		{[]string{"--help"}, 0, "Exit status: 0 success, 1 failure, 2 usage error", ""},
		{[]string{"plan", "--help"}, 0, "--profile", ""},
		{[]string{"--version"}, 0, "netctl dev", ""},
		{[]string{"-v"}, 0, "netctl dev", ""},
		{[]string{"version"}, 0, "netctl dev", ""},
		{[]string{"plan", probe}, 0, "safe on all 1 hosts", ""},

		{nil, 2, "", "netctl: name a command: attach, detach, list, gc, vm, selftest, vdpa, probe, nfd, plan, migrate, diagnose, hook, cni, kubevirt, stats, exporter, vhost-user, version"},
		{[]string{"nosuch"}, 2, "", `unknown command "nosuch"`},
		{[]string{"help", "nosuch"}, 2, "", "netctl: help: no help topic for 'nosuch'"},
		{[]string{"help", "-j"}, 2, `"hint":"run 'netctl --help'"`, "netctl: help: flag provided but not defined: -j"},
		{[]string{"vdpa", "help", "--bogus"}, 2, "", "netctl: help: flag provided but not defined: -bogus"},
		{[]string{"--bogus"}, 2, "", "flag provided but not defined: -bogus"},
		{[]string{"vdpa"}, 2, "", "vdpa: name a command: mgmtdev, dev"},
		{[]string{"vdpa", "bogus"}, 2, "", `vdpa: unknown command "bogus"`},
		{[]string{"vdpa", "dev"}, 2, "", "vdpa dev: name a command"},
		{[]string{"selftest", "extra"}, 2, "", `selftest: takes no arguments, got "extra"`},
		{[]string{"selftest", "--bogus"}, 2, "", "selftest: flag provided but not defined: -bogus"},
		{[]string{"selftest", "--queues", "x"}, 2, "", `invalid value "x" for flag -queues`},
		{[]string{"probe", "extra"}, 2, "", "probe: takes no arguments"},
		{[]string{"diagnose", "extra"}, 2, "", "diagnose: takes no arguments"},
		{[]string{"diagnose"}, 2, "", "diagnose: name a running QEMU with --qmp SOCKET"},
		{[]string{"diagnose", "-j"}, 2, `"hint":"run 'netctl diagnose --help'"`, "diagnose: name a running QEMU"},
		{[]string{"diagnose", "--qmp", "/x.sock", "--from", "/x.json"}, 2, "", "diagnose: use --qmp SOCKET for a running QEMU or --from FILE"},
		{[]string{"diagnose", "--tap", "vnet0"}, 2, "", "diagnose: --tap goes with --from"},
		{[]string{"diagnose", "--timeout", "0s", "--qmp", "/x.sock"}, 2, "", "diagnose: --timeout 0s: use a positive duration"},
		{[]string{"version", "extra"}, 2, "", "version: takes no arguments"},
		{[]string{"nfd", "write", "--dir", "features.d"}, 2, "", `nfd write: --dir "features.d": give an absolute path`},
		{[]string{"nfd", "remove", "--dir", "features.d"}, 2, "", `nfd remove: --dir "features.d": give an absolute path`},
		{[]string{"plan"}, 2, "", "plan: takes at least 1 argument(s) (HOST.json...), got 0"},
		{[]string{"plan", probe, "--json"}, 2, `"hint":"run 'netctl plan --help'"`, `"--json" after the arguments: put flags first`},
		{[]string{"vdpa", "mgmtdev", "show", "x"}, 2, "", "vdpa mgmtdev show: takes no arguments"},
		{[]string{"vdpa", "dev", "show", "a", "b"}, 2, "", "vdpa dev show: takes 0 to 1 argument(s) ([DEV]), got 2"},
		{[]string{"vdpa", "dev", "config", "show", "a", "b"}, 2, "", "vdpa dev config show: takes 0 to 1"},
		{[]string{"vdpa", "dev", "del"}, 2, "", "vdpa dev del: takes 1 argument(s) (DEV), got 0"},
		{[]string{"vdpa", "dev", "del", "a", "b"}, 2, "", "vdpa dev del: takes 1 argument(s) (DEV), got 2"},
		{[]string{"vdpa", "dev", "vstats", "a"}, 2, "", "vdpa dev vstats: takes 2 argument(s) (DEV QUEUE), got 1"},
		{[]string{"vdpa", "dev", "add", "--mgmtdev", "m", "x"}, 2, "", "vdpa dev add: --name is required"},
		{[]string{"vdpa", "dev", "add", "--name", "x", "--mgmtdev", "m", "extra"}, 2, "", "vdpa dev add: takes no arguments"},
		{[]string{"vdpa", "-j", "dev", "del"}, 2, `"hint":"run 'netctl vdpa dev del --help'"`, "takes 1 argument"},

		{[]string{"plan", "/nonexistent.json"}, 1, "", "netctl: plan: open /nonexistent.json: no such file or directory"},
		{[]string{"plan", "--json", "/nonexistent.json"}, 1, `{"error":"plan: open /nonexistent.json: no such file or directory","hint":""}`, "netctl: plan: open"},
		{[]string{"diagnose", "--qmp", "/nonexistent.sock", "-j"}, 1, `"error":"diagnose: qmp: connect /nonexistent.sock`, "netctl: diagnose: qmp: connect"},
		{[]string{"diagnose", "--from", "/nonexistent.json"}, 1, "", "netctl: diagnose: "},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := execNetctl(t, bin, tc.args...)
			if r.code != tc.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, tc.code, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stdout, tc.stdout) || !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("stdout %q, want %q in it\nstderr %q, want %q in it", r.stdout, tc.stdout, r.stderr, tc.stderr)
			}
			lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
			switch tc.code {
			case 0:
				if r.stderr != "" {
					t.Errorf("stderr on success: %q", r.stderr)
				}
			case 2:
				if len(lines) != 2 || !strings.HasPrefix(lines[0], "netctl: ") || !strings.HasPrefix(lines[1], "run 'netctl") || !strings.HasSuffix(lines[1], "'") {
					t.Errorf("a usage error is one line and a hint, got:\n%s", r.stderr)
				}
				if strings.Contains(r.stdout+r.stderr, "USAGE:") {
					t.Errorf("a usage error printed the help")
				}
			case 1:
				if !strings.HasPrefix(lines[0], "netctl: ") {
					t.Errorf("stderr %q, want netctl: <what failed>: <why>", r.stderr)
				}
			}
			if tc.code != 0 && hasStutter(lines[0]) {
				t.Errorf("the error repeats its context: %q", lines[0])
			}
			if wantJSON := argsWantJSON(tc.args); tc.code != 0 && wantJSON {
				var e map[string]string
				if err := json.Unmarshal([]byte(r.stdout), &e); err != nil || len(e) != 2 || e["error"] == "" || !strings.Contains(lines[0], e["error"]) {
					t.Errorf("--json error on stdout: %q (%v), want {\"error\": ..., \"hint\": ...}", r.stdout, err)
				}
				if _, ok := e["hint"]; !ok {
					t.Errorf("no hint key: %q", r.stdout)
				}
			} else if tc.code != 0 && r.stdout != "" {
				t.Errorf("stdout without --json on failure: %q", r.stdout)
			}
		})
	}
}

// TestSelftestErrorStutter: selftest's error names selftest once (it used
// to be "selftest failed: selftest: ...").
func TestSelftestErrorStutter(t *testing.T) {
	if _, err := os.Stat("/dev/vhost-net"); err == nil {
		t.Skip("this host has /dev/vhost-net")
	}
	r := execNetctl(t, netctlBinary(t), "selftest", "-j")
	if r.code != 1 || !strings.HasPrefix(r.stderr, "netctl: selftest: ") || hasStutter(r.stderr) {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
	var e struct{ Error, Hint string }
	if err := json.Unmarshal([]byte(r.stdout), &e); err != nil || !strings.HasPrefix(e.Error, "selftest: ") {
		t.Errorf("stdout %q: %v", r.stdout, err)
	}
}

// TestHelpShowsDefaultsOnce: no flag line says its default twice, and
// false, 0 and "" are not shown as defaults.
func TestHelpShowsDefaultsOnce(t *testing.T) {
	var walk func(path []string, cmds []*cli.Command)
	walk = func(path []string, cmds []*cli.Command) {
		for _, c := range cmds {
			if c.Name == "help" { // urfave/cli's own, which lists itself as its subcommand
				continue
			}
			p := append(append([]string(nil), path...), c.Name)
			var out bytes.Buffer
			code := runApp(newApp(), append(append([]string{"netctl"}, p...), "--help"), &out, &out)
			if code != 0 {
				t.Errorf("netctl %s --help: exit %d", strings.Join(p, " "), code)
			}
			for _, l := range strings.Split(out.String(), "\n") {
				if strings.Count(l, "(default") > 1 || strings.Contains(l, "(default: false)") || strings.Contains(l, "(default: 0)") || strings.Contains(l, "(default: 0s)") {
					t.Errorf("netctl %s --help: %q", strings.Join(p, " "), l)
				}
			}
			walk(p, c.Subcommands)
		}
	}
	walk(nil, newApp().Commands)
	var out bytes.Buffer
	runApp(newApp(), []string{"netctl", "selftest", "--help"}, &out, &out)
	if !strings.Contains(out.String(), "(default 60s)\n") || !strings.Contains(out.String(), "(default: 2000)") {
		t.Errorf("selftest help lost its defaults:\n%s", out.String())
	}
	out.Reset()
	runApp(newApp(), []string{"netctl", "vdpa", "dev", "add", "--help"}, &out, &out)
	if !strings.Contains(out.String(), "device name (required)") {
		t.Errorf("vdpa dev add help does not say --name is required:\n%s", out.String())
	}
}

// TestErrInvalidIsUsage: any command's error that wraps errs.ErrInvalid
// (a flag value out of range) exits 2 with that command's help as the
// hint, in text and in JSON; other errors exit 1.
func TestErrInvalidIsUsage(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int
		hint string
	}{
		{fmt.Errorf("widget: --size 70000: use 68 to 65535: %w", errs.ErrInvalid), 2, "run 'netctl widget --help'"},
		{fmt.Errorf("frobnicate: %w", fmt.Errorf("deep: %w", errs.ErrInvalid)), 2, "run 'netctl widget --help'"},
		{errors.New("widget: the kernel said no"), 1, ""},
		{fmt.Errorf("widget: /dev/x: %w", errs.ErrNotAvailable), 1, "run 'netctl probe' to see what this kernel offers"},
		{fmt.Errorf("widget: %w", os.ErrPermission), 1, "run as root: netctl needs CAP_NET_ADMIN"},
	} {
		app := newApp()
		cmd := &cli.Command{Name: "widget", Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Aliases: []string{"j"}}},
			Action: func(*cli.Context) error { return tc.err }}
		prepare([]*cli.Command{cmd}, "netctl")
		app.Commands = append(app.Commands, cmd)
		var stdout, stderr bytes.Buffer
		code := runApp(app, []string{"netctl", "widget", "-j"}, &stdout, &stderr)
		var e struct{ Error, Hint string }
		json.Unmarshal(stdout.Bytes(), &e)
		wantMsg := tc.err.Error()
		if tc.code == 2 { // the sentinel's text is left off: the exit code says it
			wantMsg = strings.TrimSuffix(wantMsg, ": invalid argument")
		}
		if !strings.HasPrefix(wantMsg, "widget") {
			wantMsg = "widget: " + wantMsg
		}
		if code != tc.code || e.Hint != tc.hint || e.Error != wantMsg || stderr.String() != "netctl: "+wantMsg+"\n"+tc.hint+strings.Repeat("\n", min(len(tc.hint), 1)) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", tc.err, code, stdout.String(), stderr.String())
		}
	}
}

func TestArity(t *testing.T) {
	for usage, want := range map[string][2]int{
		"": {0, 0}, " ": {0, 0}, "DEV": {1, 1}, "DEV QUEUE": {2, 2}, "[DEV]": {0, 1}, "HOST.json...": {1, -1}, "[FILE...]": {0, -1},
	} {
		if min, max := arity(usage); min != want[0] || max != want[1] {
			t.Errorf("arity(%q) = %d, %d; want %v", usage, min, max, want)
		}
	}
}

func TestHasStutter(t *testing.T) {
	for line, want := range map[string]bool{
		"netctl: selftest failed: selftest: 0 queue pairs":         true,
		"netctl: selftest failed: vhost-net: /dev/vhost-net":       true,
		"netctl: selftest: selftest: 0 queue pairs":                true,
		"netctl: plan: open /x.json: no such file or directory":    false,
		"netctl: diagnose: qmp: connect /x: dial unix /x: connect": false,
	} {
		if hasStutter(line) != want {
			t.Errorf("hasStutter(%q) = %v", line, !want)
		}
	}
}

// TestRequiredFlagShared: a required flag that is one value shared by two
// commands (or by two newApp calls) is required in both.
func TestRequiredFlagShared(t *testing.T) {
	shared := &cli.StringFlag{Name: "name", Required: true, Usage: "device name"}
	var cmds []*cli.Command
	for _, n := range []string{"a", "b"} {
		cmds = append(cmds, &cli.Command{Name: n, Flags: []cli.Flag{shared}, Action: func(*cli.Context) error { return nil }})
	}
	prepare(cmds, "netctl")
	prepare(cmds, "netctl")
	for _, n := range []string{"a", "b"} {
		app := newApp()
		app.Commands = cmds
		var stdout, stderr bytes.Buffer
		if code := runApp(app, []string{"netctl", n}, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "--name is required") {
			t.Errorf("netctl %s without --name: exit %d, %q", n, code, stderr.String())
		}
	}
	if shared.Usage != "device name (required)" {
		t.Errorf("usage %q", shared.Usage)
	}
}

// TestJSONReportedOnce: a command that already put its error in the JSON
// it printed (gc --json with a record it could not collect) leaves stdout
// one JSON document; the message still goes to stderr, exit 1.
func TestJSONReportedOnce(t *testing.T) {
	app := &cli.App{Name: "netctl", ExitErrHandler: func(*cli.Context, error) {}, Commands: []*cli.Command{{
		Name:  "gcish",
		Flags: []cli.Flag{&cli.BoolFlag{Name: "json"}},
		Action: func(c *cli.Context) error {
			fmt.Fprintln(c.App.Writer, `{"nics":[{"error":"delete link nctlmv0: busy"}]}`)
			return &jsonReported{errors.New("gc: 1 record not collected")}
		},
	}}}
	var stdout, stderr bytes.Buffer
	code := runApp(app, []string{"netctl", "gcish", "--json"}, &stdout, &stderr)
	if code != 1 || strings.Count(stdout.String(), "\n") != 1 || !strings.Contains(stderr.String(), "netctl: gc: 1 record not collected") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
}
