package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
)

// badNumbers are out-of-range values for every numeric flag of netctl
// (issue 10 §2 "Sizes and ranges": --mtu 70000, --max-vqp 65536,
// --frames -5, --queues 0 "and any similar flag"), keyed by the command
// path and the flag, with the arguments the command needs besides it.
// TestEveryNumericFlagIsChecked fails for a numeric flag that is not here,
// so a new one cannot go in unchecked.
var badNumbers = map[string]struct {
	args []string // the command's other arguments (the flag goes first)
	bad  []string
}{
	"attach --queues":                {[]string{"--vm", "nctl-no-such-vm", "--id", "n1"}, []string{"0", "-1", "257"}},
	"attach --mtu":                   {[]string{"--vm", "nctl-no-such-vm", "--id", "n1"}, []string{"70000", "65522", "67", "0", "-1"}},
	"attach --timeout":               {[]string{"--vm", "nctl-no-such-vm", "--id", "n1"}, []string{"0s", "-1s"}},
	"detach --timeout":               {[]string{"--vm", "nctl-no-such-vm", "--id", "n1"}, []string{"0s", "-1s"}},
	"gc --timeout":                   {[]string{"--dry-run"}, []string{"0s", "-1s"}},
	"migrate export --timeout":       {[]string{"--vm", "nctl-no-such-vm"}, []string{"0s", "-1s"}},
	"migrate incoming --timeout":     {[]string{"--vm", "nctl-no-such-vm", "--from", "/nonexistent"}, []string{"0s", "-1s"}},
	"migrate finish --wait":          {[]string{"--vm", "nctl-no-such-vm"}, []string{"0s", "-1s"}},
	"hook pin --timeout":             {[]string{"nctl-no-such-domain"}, []string{"0s", "-1s"}},
	"vm list --timeout":              {nil, []string{"0s", "-1s"}},
	"nfd write --every":              {[]string{"--dir", "/nonexistent/netctl-nfd"}, []string{"-1s", "500ms", "1000000h"}}, // 3x would overflow: the labels would expire an hour in
	"nfd write --expiry":             {[]string{"--dir", "/nonexistent/netctl-nfd"}, []string{"-1s"}},                      // 0 is "never", as its usage says
	"selftest --queues":              {nil, []string{"0", "-1", "257"}},
	"selftest --frames":              {nil, []string{"-5", "0", "100001"}},
	"selftest --frame-size":          {nil, []string{"59", "2037", "0"}},
	"selftest --timeout":             {nil, []string{"-1s"}}, // 0 is "the default, 60s", as its usage says
	"vdpa --timeout":                 {[]string{"dev", "show"}, []string{"0s", "-1s"}},
	"vdpa dev add --mtu":             {[]string{"--name", "x", "--mgmtdev", "m"}, []string{"70000", "65536", "67", "0"}},
	"vdpa dev add --max-vqp":         {[]string{"--name", "x", "--mgmtdev", "m"}, []string{"65536", "32769", "0"}},
	"diagnose --timeout":             {[]string{"--qmp", "/nonexistent/netctl.sock"}, []string{"0s", "-1s"}},
	"stats --interval":               {[]string{"--id", "n1"}, []string{"0s", "-1s", "50ms", "2h"}},
	"exporter --scrape-timeout":      {[]string{"--listen", "127.0.0.1:0"}, []string{"0s", "500ms", "6m"}},
	"exporter --ring-sample":         {[]string{"--listen", "127.0.0.1:0"}, []string{"-1s", "5ms", "11s"}},
	"exporter --gone-for":            {[]string{"--listen", "127.0.0.1:0"}, []string{"0s", "-1s"}},
	"vhost-user --queues":            {[]string{"--socket", "SOCKET", "--tap", "nctlrange0"}, []string{"0", "-1", "129"}},
	"vhost-user --handshake-timeout": {[]string{"--socket", "SOCKET", "--tap", "nctlrange0"}, []string{"-1s"}}, // 0 is "no deadline", as its usage says
}

// numericFlags lists "PATH --FLAG" for every int, uint and duration flag
// in the command tree, on groups too (netctl vdpa --timeout).
func numericFlags(path string, cmds []*cli.Command) []string {
	var out []string
	for _, c := range cmds {
		if c.Name == "help" {
			continue
		}
		p := strings.TrimSpace(path + " " + c.Name)
		for _, f := range c.Flags {
			switch f.(type) {
			case *cli.IntFlag, *cli.UintFlag, *cli.Int64Flag, *cli.Uint64Flag, *cli.Float64Flag, *cli.DurationFlag:
				out = append(out, p+" --"+f.Names()[0])
			}
		}
		out = append(out, numericFlags(p, c.Subcommands)...)
	}
	return out
}

// TestEveryNumericFlagIsChecked runs the built binary with each
// out-of-range value: a usage error (exit 2) that names the command and
// the flag, says the valid range, hints at that command's help, and comes
// before anything is looked up or changed (attach --vm names no running
// VM, so a value checked only after the lookup gives exit 1 and fails
// here). As root it runs in a network namespace of its own, so a value
// that got through would change nothing on this machine.
func TestEveryNumericFlagIsChecked(t *testing.T) {
	flags := numericFlags("", newApp().Commands)
	if len(flags) < 15 {
		t.Fatalf("found only %v", flags)
	}
	for _, f := range flags {
		if len(badNumbers[f].bad) == 0 {
			t.Errorf("numeric flag %q has no out-of-range values in badNumbers: add them", f)
		}
	}
	bin := netctlBinary(t)
	dir := t.TempDir()
	t.Setenv("NETCTL_RUN_DIR", filepath.Join(dir, "run"))
	for _, f := range flags {
		c, ok := badNumbers[f]
		if !ok {
			continue
		}
		i := strings.LastIndex(f, " --")
		path, flag := f[:i], f[i+1:]
		for _, v := range c.bad {
			args := slices.Clone(strings.Fields(path))
			if path == "vdpa" { // a group flag goes before the subcommand
				args = append(args, flag, v)
				args = append(args, c.args...)
			} else {
				args = append(args, flag, v)
				for _, a := range c.args {
					args = append(args, strings.ReplaceAll(a, "SOCKET", filepath.Join(dir, "vu.sock")))
				}
			}
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				r := execNetctlNS(t, bin, args...)
				lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
				leaf := path
				if path == "vdpa" {
					leaf = "vdpa dev show"
				}
				noun := strings.Fields(path)[0]
				if r.code != 2 || len(lines) != 2 {
					t.Fatalf("exit %d, stderr %q; want exit 2, one line and a hint", r.code, r.stderr)
				}
				if !strings.HasPrefix(lines[0], "netctl: "+noun) || !strings.Contains(lines[0], flag+" ") {
					t.Errorf("%q does not name the command (%s) and the flag (%s)", lines[0], noun, flag)
				}
				if !strings.Contains(lines[0], "use ") && !strings.Contains(lines[0], "out of range") && !strings.Contains(lines[0], "positive duration") {
					t.Errorf("%q does not say the valid range", lines[0])
				}
				if want := "run 'netctl " + leaf + " --help'"; lines[1] != want {
					t.Errorf("hint %q, want %q", lines[1], want)
				}
			})
		}
	}
}

// execNetctlNS is execNetctl with a 20 s bound, in a network namespace of
// its own when run as root.
func execNetctlNS(t *testing.T, bin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	if os.Geteuid() == 0 {
		cmd = exec.CommandContext(ctx, "unshare", append([]string{"--net", "--", bin}, args...)...)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("netctl %v: %v", args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("netctl %v: still running after 20 s (the value was taken): %s", args, stderr.String())
	}
	return result{cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()}
}

// TestReaperRefusesBadNumbers: the hidden vhost-user-reap takes its inode
// and ifindex as strings; one that does not parse is a usage error before
// it waits on its pipe, not a reaper that silently does nothing.
func TestReaperRefusesBadNumbers(t *testing.T) {
	bin := netctlBinary(t)
	for _, args := range [][]string{{"--socket-ino", "abc"}, {"--ifindex", "x1"}, {"--ifindex", "-3"}, {"--socket-ino", "-1"}} {
		r := execNetctlNS(t, bin, append([]string{"vhost-user-reap"}, args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, "vhost-user-reap: "+args[0]+" ") {
			t.Errorf("vhost-user-reap %v: exit %d, stderr %q; want exit 2 naming %s", args, r.code, r.stderr, args[0])
		}
	}
}

// TestReaperTakesWhatTheBridgeGives: the arguments startReaper passes when
// the bridge made no link (ifindex 0) are taken, and the reaper removes the
// socket whose inode it was given once its pipe (stdin) closes.
func TestReaperTakesWhatTheBridgeGives(t *testing.T) {
	bin := netctlBinary(t)
	sock := filepath.Join(t.TempDir(), "s")
	if err := os.WriteFile(sock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	ino := fi.Sys().(*syscall.Stat_t).Ino
	r := execNetctlNS(t, bin, "vhost-user-reap", "--socket", sock, "--socket-ino", strconv.FormatUint(ino, 10), "--link", "", "--ifindex", "0")
	if _, err := os.Stat(sock); r.code != 0 || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("exit %d (%q), socket: %v; want exit 0 and the socket removed", r.code, r.stderr, err)
	}
}
