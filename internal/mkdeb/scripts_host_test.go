package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netctl/netctl/internal/testenv"
)

// TestHostDebScripts runs the package's maintainer scripts (deploy/debian)
// as dpkg calls them, with and without systemd, against a stand-in
// systemctl and systemd-tmpfiles that log their arguments. Each run is in
// its own mount namespace with a tmpfs on /run (where the scripts look
// for /run/systemd/system): the machine's /run and its systemd are not
// touched.
func TestHostDebScripts(t *testing.T) {
	testenv.Host(t)
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Fatal("unshare missing: install util-linux")
	}
	stubs := t.TempDir()
	for _, tool := range []string{"systemctl", "systemd-tmpfiles"} {
		script := "#!/bin/sh\necho \"" + tool + " $*\" >>\"$STUB_LOG\"\n"
		if err := os.WriteFile(filepath.Join(stubs, tool), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script := func(name string) string {
		p, err := filepath.Abs(filepath.Join(repoRoot, "deploy/debian", name))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	// run calls a script as dpkg would and returns what it asked of
	// systemd, one call a line.
	run := func(t *testing.T, systemd bool, name string, args ...string) string {
		t.Helper()
		log := filepath.Join(t.TempDir(), "log")
		setup := "mount -t tmpfs -o mode=0755 r24run /run"
		if systemd {
			setup += " && mkdir -p /run/systemd/system"
		}
		cmd := exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "sh", "-c",
			setup + ` && exec sh "$@"`, "sh", script(name)}, args...)...)
		cmd.Env = append(os.Environ(), "PATH="+stubs+":/usr/sbin:/usr/bin:/sbin:/bin", "STUB_LOG="+log)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %s (systemd %v): %v\n%s", name, strings.Join(args, " "), systemd, err, out)
		}
		b, err := os.ReadFile(log)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return string(b)
	}
	has := func(t *testing.T, got, want string) {
		t.Helper()
		if !strings.Contains(got, want) {
			t.Errorf("calls %q lack %q", got, want)
		}
	}
	lacks := func(t *testing.T, got, word string) {
		t.Helper()
		if strings.Contains(got, word) {
			t.Errorf("calls %q have %q", got, word)
		}
	}

	t.Run("install", func(t *testing.T) {
		got := run(t, true, "postinst", "configure", "")
		has(t, got, "systemctl --system daemon-reload")
		has(t, got, "systemd-tmpfiles --create netctl.conf")
		lacks(t, got, "restart")
		lacks(t, got, "start ")
		lacks(t, got, "enable")
	})
	t.Run("upgrade", func(t *testing.T) {
		// The exporter an operator runs keeps the old binary (deleted by
		// the unpack) until it is restarted; one that is not running
		// stays stopped.
		if got := run(t, true, "prerm", "upgrade", "1.1.0"); got != "" {
			t.Errorf("prerm upgrade asked systemd %q: the units keep running through an upgrade", got)
		}
		got := run(t, true, "postinst", "configure", "1.0.0")
		has(t, got, "systemctl --system daemon-reload")
		has(t, got, "systemctl try-restart netctl-exporter.service")
		lacks(t, got, "enable")
	})
	t.Run("remove", func(t *testing.T) {
		got := run(t, true, "prerm", "remove")
		has(t, got, "systemctl stop netctl-exporter.service netctl-gc.timer")
		has(t, got, "disable netctl-exporter.service netctl-gc.timer")
		has(t, run(t, true, "postrm", "remove"), "daemon-reload")
		has(t, run(t, true, "postrm", "purge"), "daemon-reload")
	})
	t.Run("no systemd", func(t *testing.T) {
		// A container or chroot: nothing is started, stopped or
		// reloaded; links an operator made are still removed.
		for _, c := range [][]string{{"postinst", "configure", ""}, {"postinst", "configure", "1.0.0"}, {"postrm", "remove"}, {"postrm", "purge"}} {
			if got := run(t, false, c[0], c[1:]...); got != "" {
				t.Errorf("%s without systemd asked %q", strings.Join(c, " "), got)
			}
		}
		got := run(t, false, "prerm", "remove")
		lacks(t, got, "stop")
		has(t, got, "systemctl --no-reload disable netctl-exporter.service")
	})
}
