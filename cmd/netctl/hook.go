package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/netctl/netctl/hook"
	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/libvirtdom"
	"github.com/netctl/netctl/state"
)

// hookScriptName is the script `netctl hook install` writes under
// DIR/qemu.d; libvirt (6.5.0+) runs qemu.d's scripts in name order.
const hookScriptName = "50-netctl"

func hookCommand() *cli.Command {
	return &cli.Command{
		Name:  "hook",
		Usage: "libvirt qemu hook: create the host side of a domain's interfaces at start, delete it at release",
		Subcommands: []*cli.Command{
			hookInstallCommand(),
			hookQemuCommand(),
			hookStatusCommand(),
			hookPinCommand(),
		},
	}
}

func hookInstallCommand() *cli.Command {
	return &cli.Command{
		Name:  "install",
		Usage: "write DIR/qemu.d/" + hookScriptName + ", a script that runs this netctl as libvirt's qemu hook",
		Description: "The script is two lines: #!/bin/sh and an exec of this netctl binary's absolute path with\n" +
			"\"hook qemu [--config PATH] [--run-dir DIR] -- \\\"$@\\\"\": libvirt runs hooks with a filtered environment, so\n" +
			"the settings (from --config/--run-dir, or NETCTL_HOOK_CONFIG/NETCTL_RUN_DIR at install) go into the script.\n" +
			"The binary must be one only root can replace (root's, not writable by others, in root's directories).\n" +
			"libvirtd (or virtqemud) reads its hooks only when it starts: restart it after a new hook directory or\n" +
			"script appears.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "dir", Value: "/etc/libvirt/hooks", Usage: "libvirt's hook directory"},
			&cli.StringFlag{Name: "binary", Usage: "the netctl the script runs (default: this one)"},
			&cli.StringFlag{Name: "config", Usage: "the host config the hook reads, written into the script (default: $NETCTL_HOOK_CONFIG, else " + hook.DefaultConfigPath + ")"},
			&cli.StringFlag{Name: "run-dir", Usage: "where the hook keeps its records, written into the script (default: $NETCTL_RUN_DIR, else " + state.DefaultDir + ")"},
		},
		Action: func(c *cli.Context) error {
			bin := c.String("binary")
			if bin == "" {
				exe, err := os.Executable()
				if err != nil {
					return fmt.Errorf("hook install: finding this binary: %w (name it with --binary)", err)
				}
				bin = exe
			}
			set := hookSettings{config: c.String("config"), runDir: c.String("run-dir")}
			if set.config == "" {
				set.config = hookConfigPath()
			}
			if set.runDir == "" {
				set.runDir = runDir()
			}
			path, changed, err := installHook(c.String("dir"), bin, set)
			if err != nil {
				return err
			}
			if !changed {
				fmt.Fprintf(c.App.Writer, "%s is already installed and runs %s\n", path, bin)
				return nil
			}
			fmt.Fprintf(c.App.Writer, "wrote %s (runs %s hook qemu)\n", path, bin)
			fmt.Fprintln(c.App.Writer, "libvirtd reads hooks only when it starts: restart libvirtd (or virtqemud) so that it runs this one")
			return nil
		},
	}
}

// hookDefaultConfig is the config path the hook reads without --config.
const hookDefaultConfig = hook.DefaultConfigPath

// shQuote quotes s for sh.
func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// hookScript is the script's text: exec of bin with the settings that
// differ from the defaults, then -- so that libvirt's first argument, the
// domain's name, is never taken for a flag (libvirt allows "-x").
func hookScript(bin string, set hookSettings) string {
	s := "#!/bin/sh\nexec " + shQuote(bin) + " hook qemu"
	if set.config != "" && set.config != hookDefaultConfig {
		s += " --config " + shQuote(set.config)
	}
	if set.runDir != "" && set.runDir != state.DefaultDir {
		s += " --run-dir " + shQuote(set.runDir)
	}
	return s + " -- \"$@\"\n"
}

// isHookScript says whether b is a script hookScript wrote (for any
// binary and settings, and the older form without --): only such a
// script is replaced.
func isHookScript(b []byte) bool {
	_, _, ok := parseHookScript(b)
	return ok
}

// parseHookScript reads back what hookScript wrote: the binary and the
// settings, for any path (quotes, spaces, '$', newlines); ok is false for
// any other text, a script edited by hand included.
func parseHookScript(b []byte) (bin string, set hookSettings, ok bool) {
	s, found := strings.CutPrefix(string(b), "#!/bin/sh\nexec ")
	if !found {
		return "", set, false
	}
	var words []string
	for {
		if s == `"$@"`+"\n" {
			break
		}
		var w strings.Builder
		for len(s) > 0 && s[0] != ' ' {
			switch {
			case strings.HasPrefix(s, `\'`):
				w.WriteByte('\'')
				s = s[2:]
			case s[0] == '\'':
				q := strings.IndexByte(s[1:], '\'')
				if q < 0 {
					return "", set, false
				}
				w.WriteString(s[1 : 1+q])
				s = s[q+2:]
			case s[0] >= 'a' && s[0] <= 'z' || s[0] == '-':
				w.WriteByte(s[0])
				s = s[1:]
			default:
				return "", set, false
			}
		}
		if len(s) == 0 || len(words) > 8 {
			return "", set, false
		}
		words, s = append(words, w.String()), s[1:]
	}
	if len(words) < 3 || words[1] != "hook" || words[2] != "qemu" || words[0] == "" {
		return "", set, false
	}
	rest := words[3:]
	if len(rest) >= 2 && rest[0] == "--config" {
		set.config, rest = rest[1], rest[2:]
	}
	if len(rest) >= 2 && rest[0] == "--run-dir" {
		set.runDir, rest = rest[1], rest[2:]
	}
	if len(rest) == 1 && rest[0] == "--" {
		rest = nil
	}
	if len(rest) != 0 {
		return "", set, false
	}
	return words[0], set, true
}

// installedRunDir is the run dir the hook installed in dir runs with:
// the script's --run-dir, else state.DefaultDir (libvirt filters the
// environment); without an installed script, the environment's (runDir).
func installedRunDir(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "qemu.d", hookScriptName))
	if err != nil {
		return runDir()
	}
	_, set, ok := parseHookScript(b)
	switch {
	case !ok:
		return runDir()
	case set.runDir == "":
		return state.DefaultDir // what libvirt's run of the script uses
	}
	return set.runDir
}

// hookQemuFlags are hook qemu's flags, which the installed script passes.
func hookQemuFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "config", Usage: "the host config (default: $NETCTL_HOOK_CONFIG, else " + hook.DefaultConfigPath + ")"},
		&cli.StringFlag{Name: "run-dir", Usage: "where the records live (default: $NETCTL_RUN_DIR, else " + state.DefaultDir + ")"},
	}
}

// installHook writes dir/qemu.d/50-netctl (mode 0755) atomically; changed
// is false when an identical script was there. A 50-netctl that is not a
// netctl hook script is left alone (ErrConflict); dir/qemu, libvirt's
// single-script hook, is never touched. A binary that anyone but root
// could replace or rewrite is refused (hook.CheckTrustedExecutable):
// libvirtd runs it as root.
func installHook(dir, bin string, set hookSettings) (path string, changed bool, err error) {
	if !filepath.IsAbs(dir) {
		return "", false, usageErr("netctl hook install", "--dir %q: use an absolute path", dir)
	}
	abs, err := filepath.Abs(bin)
	if err != nil {
		return "", false, fmt.Errorf("hook install: %w", err)
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	if st, err := os.Stat(abs); err != nil || !st.Mode().IsRegular() || st.Mode()&0o111 == 0 {
		return "", false, usageErr("netctl hook install", "--binary %q is not an executable file", bin)
	}
	if err := hook.CheckTrustedExecutable(abs); err != nil {
		return "", false, fmt.Errorf("hook install: %w", err)
	}
	if set.config != "" && !filepath.IsAbs(set.config) {
		return "", false, usageErr("netctl hook install", "--config %q: use an absolute path", set.config)
	}
	if set.runDir != "" && !filepath.IsAbs(set.runDir) {
		return "", false, usageErr("netctl hook install", "--run-dir %q: use an absolute path", set.runDir)
	}
	if set.runDir != "" {
		if err := hook.CheckTrustedDir(set.runDir); err != nil {
			return "", false, fmt.Errorf("hook install: %w", err)
		}
	}
	d := filepath.Join(dir, "qemu.d")
	path = filepath.Join(d, hookScriptName)
	want := []byte(hookScript(abs, set))
	old, err := os.ReadFile(path)
	switch {
	case err == nil && bytes.Equal(old, want):
		return path, false, nil
	case err == nil && !isHookScript(old):
		return "", false, fmt.Errorf("hook install: %s exists and is not netctl's hook script: move it to another name in %s (libvirt runs every script there) and run install again: %w", path, d, errs.ErrConflict)
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return "", false, fmt.Errorf("hook install: %w", err)
	}
	if err := os.MkdirAll(d, 0o755); err != nil {
		return "", false, fmt.Errorf("hook install: %w (run as root)", err)
	}
	tmp, err := os.CreateTemp(d, ".50-netctl-*")
	if err != nil {
		return "", false, fmt.Errorf("hook install: %w (run as root)", err)
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	if _, err := tmp.Write(want); err != nil {
		tmp.Close()
		return "", false, fmt.Errorf("hook install: %w", err)
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return "", false, fmt.Errorf("hook install: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", false, fmt.Errorf("hook install: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", false, fmt.Errorf("hook install: %w", err)
	}
	return path, true, nil
}

// oneLineError is an error the CLI prints alone, without a hint line:
// libvirt shows a hook's whole stderr in its error.
type oneLineError struct{ err error }

func (e *oneLineError) Error() string { return e.err.Error() }
func (e *oneLineError) Unwrap() error { return e.err }

func hookConfigPath() string {
	if p := os.Getenv("NETCTL_HOOK_CONFIG"); p != "" {
		return p
	}
	return hook.DefaultConfigPath
}

func hookQemuCommand() *cli.Command {
	return &cli.Command{
		Name:      "qemu",
		Usage:     "what libvirt runs: act on one domain's interfaces for OP SUBOP, with the domain XML on stdin",
		ArgsUsage: "DOMAIN OP SUBOP [EXTRA]",
		Description: "prepare begin: create the taps (<interface type='ethernet'> with <target dev managed='no'/>) and vdpa devices\n" +
			"(<interface type='vdpa'> with <source dev='/run/netctl/vdpa/NAME'/>) that netctl manages, and check direct\n" +
			"interfaces' lower devices. started begin: record. release end: delete exactly what netctl created.\n" +
			"reconnect begin: rebuild the record. migrate begin (on the destination, before the migration): check, creating\n" +
			"nothing, that this host can carry each interface netctl manages (backend, forced offloads, and every offload or\n" +
			"ring feature the domain does not turn off that the guest may have negotiated at the source); a refusal cancels\n" +
			"the migration and the domain runs on at the source. Stdout stays empty (libvirt: the XML is unchanged); the host\n" +
			"config's \"plan\" (netctl plan -j's output) pins every decision to the pool's set. Other operations do nothing.\n" +
			"Each interface is decided by policy first\n" +
			"(backend, profile, the offloads <driver><host/><guest/> forces on and off): a forced-on offload the backend\n" +
			"cannot carry refuses the start. Which interfaces: the domain's\n" +
			"<metadata><netctl:hook xmlns:netctl='" + hook.Namespace + "'><netctl:interface mac=... mgmtdev=.../>,\n" +
			"and the host config " + hook.DefaultConfigPath + " (NETCTL_HOOK_CONFIG). Log: " + hook.DefaultLogPath + ".",
		Flags: hookQemuFlags(),
		// No "help" subcommand: libvirt passes the domain's name first,
		// and a domain may be called "help" or "h" (--help stays).
		HideHelpCommand: true,
		Action: func(c *cli.Context) error {
			a := c.Args()
			set := hookSettings{config: c.String("config"), runDir: c.String("run-dir")}
			if set.config == "" {
				set.config = hookConfigPath()
			}
			if set.runDir == "" {
				set.runDir = runDir()
			}
			err := runHookQemu(c.App.ErrWriter, set, a.Get(0), a.Get(1), a.Get(2), stdin)
			if err != nil {
				return &oneLineError{err: err}
			}
			return nil
		},
	}
}

// hookSettings is where the hook keeps its records and reads its config.
// libvirt runs hooks with a filtered environment, so the installed script
// passes them as arguments (--run-dir, --config); the environment
// (NETCTL_RUN_DIR, NETCTL_HOOK_CONFIG) counts only when the hook is run by
// hand.
type hookSettings struct {
	config, runDir string
}

// runDirOrDefault is the run dir the hook uses: --run-dir (or
// NETCTL_RUN_DIR by hand), else state.DefaultDir.
func (s hookSettings) runDirOrDefault() string {
	if s.runDir == "" {
		return state.DefaultDir
	}
	return s.runDir
}

// hookOps are the operations the hook acts in; every other one exits 0
// at once, reading neither stdin nor the config.
var hookOps = map[string]bool{"prepare begin": true, "started begin": true, "reconnect begin": true, "release end": true, "migrate begin": true}

// runHookQemu runs one hook call. It logs each step to the log file and
// a summary line to stderr; it never writes to stdout (libvirt takes a
// migrate or restore hook's stdout as the domain's new XML).
func runHookQemu(stderr io.Writer, set hookSettings, domain, op, subop string, stdin io.Reader) error {
	if !hookOps[op+" "+subop] {
		return nil
	}
	cfg, cfgErr := hook.LoadConfig(set.config)
	var log io.Writer = io.Discard
	if lf, lerr := openHookLog(cfg); lerr != nil {
		fmt.Fprintf(stderr, "netctl hook: no log file: %v\n", lerr)
	} else if lf != nil {
		defer lf.Close()
		log = &safeWriter{w: lf} // domain names and errors from outside: read with cat or tail
	}
	if cfgErr != nil {
		fmt.Fprintf(log, "%s netctl hook: %s %s %s: the host config does not load (%v): only domains with an interface they ask netctl for are refused\n",
			time.Now().UTC().Format(time.RFC3339), domain, op, subop, cfgErr)
	}
	var st *state.Store
	stErr := hook.CheckTrustedDir(set.runDirOrDefault())
	if stErr == nil {
		st, stErr = state.Open(set.runDirOrDefault())
	}
	if stErr != nil {
		// Without its records the hook can neither know nor release
		// what it made: it says so and stands aside; a prepare that
		// would make something fails below on the nil store.
		fmt.Fprintf(log, "%s netctl hook: %s %s %s: %v\n", time.Now().UTC().Format(time.RFC3339), domain, op, subop, stErr)
	}
	timeout := hook.DefaultTimeout
	if cfg != nil {
		timeout = cfg.TimeoutOrDefault()
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	h := &hook.Hook{Config: cfg, ConfigErr: cfgErr, Store: st, StoreErr: stErr, Devices: hook.RealDevices{}, Log: log}
	res, err := h.Run(ctx, domain, op, subop, stdin)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w (the hook's timeout is %s; raise \"timeout\" in %s)", err, timeout, set.config)
		}
		fmt.Fprintf(log, "%s netctl hook: %s %s %s: failed: %v\n", time.Now().UTC().Format(time.RFC3339), domain, op, subop, err)
		return err
	}
	if len(res.Done) > 0 || len(res.Notes) > 0 {
		fmt.Fprintf(stderr, "netctl hook: %s %s: %s\n", domain, op, strings.Join(append(res.Done, res.Notes...), "; "))
	}
	return nil
}

// hookDefaultLog is the log a hook call without a config's "log" (none,
// or one that did not load) appends to; tests point it elsewhere.
var hookDefaultLog = hook.DefaultLogPath

func openHookLog(cfg *hook.Config) (*os.File, error) {
	var p string
	if cfg != nil {
		p = cfg.Log
	}
	if p == "-" {
		return nil, nil
	}
	if p == "" {
		p = hookDefaultLog
	}
	return hook.OpenLog(p)
}

func hookStatusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "what the hook prepared for each domain (or one)",
		ArgsUsage: "[DOMAIN]",
		Description: "The records are read where the installed hook writes them: the --run-dir in DIR/qemu.d/" + hookScriptName + "\n" +
			"(hook install writes it there), else $NETCTL_RUN_DIR, else " + state.DefaultDir + ".",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Aliases: []string{"j"}, Usage: "print JSON"},
			&cli.StringFlag{Name: "dir", Value: "/etc/libvirt/hooks", Usage: "libvirt's hook directory, where the installed script names the run dir"},
			&cli.StringFlag{Name: "run-dir", Usage: "read the records here instead"},
			&cli.StringFlag{Name: "libvirt", Aliases: []string{"c", "connect"}, Value: libvirtdom.DefaultURI, Usage: "libvirt URI to read what runs from (the live domain's XML); '' to not ask"},
		},
		Action: func(c *cli.Context) error {
			rd := c.String("run-dir")
			if rd == "" {
				rd = installedRunDir(c.String("dir"))
			}
			st, err := state.Open(rd)
			if err != nil {
				return err
			}
			h := &hook.Hook{Store: st}
			ds, bad, err := h.Status(c.Args().First())
			if err != nil {
				return err
			}
			// What runs, from libvirt, beside what was decided: never one
			// for the other.
			var live []statusRecord
			if c.String("libvirt") != "" {
				live = liveStatus(c.String("libvirt"), 5*time.Second, ds)
			} else {
				for _, d := range ds {
					live = append(live, statusRecord{Domain: d})
				}
			}
			if c.Bool("json") {
				if live == nil {
					live = []statusRecord{}
				}
				return printJSON(c.App.Writer, live)
			}
			for _, b := range bad {
				fmt.Fprintf(c.App.ErrWriter, "unreadable record, left alone: %v\n", b)
			}
			if len(ds) == 0 {
				if c.Args().Present() {
					fmt.Fprintf(c.App.Writer, "netctl prepared nothing for domain %s\n", c.Args().First())
				} else {
					fmt.Fprintln(c.App.Writer, "netctl prepared nothing for any domain")
				}
				return nil
			}
			for i, d := range ds {
				fmt.Fprintf(c.App.Writer, "%s: %s since %s\n", d.Name, d.Status, d.Updated.Format(time.RFC3339))
				if l := live[i].Live; l != nil {
					fmt.Fprintf(c.App.Writer, "  libvirt: %s\n", l.State)
				}
				for _, t := range d.Taps {
					owner := fmt.Sprintf("owner %d", t.Owner)
					if t.Owner == hook.NoOwner {
						owner = "no owner (root only)"
					}
					fmt.Fprintf(c.App.Writer, "  tap %s ifindex %d, %d queue(s), %s, mac %s\n", t.Name, t.Ifindex, t.Queues, owner, t.MAC)
				}
				for _, v := range d.VDPAs {
					fmt.Fprintf(c.App.Writer, "  vdpa %s from %s: %s -> %s, mac %s\n", v.Name, v.Mgmtdev, v.Link, v.Vhost, v.MAC)
				}
				for _, it := range d.Interfaces {
					fmt.Fprintf(c.App.Writer, "  interface %s (%s %s): decided backend %s, profile %s\n", it.MAC, it.Kind, it.Name, it.Backend, it.Profile)
					fmt.Fprintf(c.App.Writer, "    runs: %s\n", live[i].Live.runsLine(it.MAC))
					if len(it.Forced) > 0 {
						fmt.Fprintf(c.App.Writer, "    forced: %s\n", strings.Join(it.Forced, " "))
					}
					fmt.Fprintf(c.App.Writer, "    offers: %s\n", strings.Join(append(it.Offer, "nothing")[:max(len(it.Offer), 1)], "|"))
					if len(it.Dropped) > 0 {
						fmt.Fprintf(c.App.Writer, "    drops: %s\n", strings.Join(slices.Sorted(maps.Keys(it.Dropped)), "|"))
					}
				}
				for _, n := range d.Notes {
					fmt.Fprintf(c.App.Writer, "  note: %s\n", n)
				}
			}
			return nil
		},
	}
}
