package main

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
)

// TestHostDebInstall builds the package (make deb), installs it on this
// machine with dpkg, runs what a user would (netctl --version, man -w,
// bash completion, systemd-analyze verify on its units), and removes and
// purges it: every path it listed is gone, except directories that were
// there before. It refuses to start when a netctl package is installed or
// when a file the package ships is already there (dpkg would replace it,
// and removing the package would delete it): it never removes what the
// package did not install.
func TestHostDebInstall(t *testing.T) {
	testenv.Host(t)
	for _, tool := range []string{"dpkg", "dpkg-deb", "dpkg-query", "make", "man"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s missing: run test/host-deps.sh (it installs man-db)", tool)
		}
	}
	if st := pkgStatus(t); st != "" {
		t.Fatalf("a netctl package is already installed here (dpkg status %q): this test installs and purges its own; "+
			"remove it first (dpkg --purge netctl) if it is a leftover, or run the test on another machine", st)
	}

	tmp := t.TempDir()
	bin := filepath.Join(tmp, "bin")
	out, err := exec.Command("make", "-C", repoRoot, "deb", "BIN="+bin).CombinedOutput()
	if err != nil {
		t.Fatalf("make deb: %v\n%s", err, out)
	}
	debs, _ := filepath.Glob(filepath.Join(bin, "netctl_*_amd64.deb"))
	if len(debs) != 1 {
		t.Fatalf("make deb made %v\n%s", debs, out)
	}
	deb := debs[0]
	built, err := exec.Command(filepath.Join(bin, "netctl"), "version").Output()
	if err != nil {
		t.Fatal(err)
	}

	// What the package lists, and what of it is here already.
	paths := debPaths(t, deb)
	existed := map[string]bool{}
	for _, p := range paths {
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		if !fi.IsDir() {
			t.Fatalf("%s is already here and no netctl package owns it: installing would replace it and removing "+
				"would delete it; move it away (make uninstall, if make install put it there) and run again", p)
		}
		existed[p] = true
	}

	dpkg(t, "-i", deb)
	installed := true
	t.Cleanup(func() {
		if installed {
			dpkg(t, "--purge", "netctl")
		}
	})

	// netctl --version says what the built binary's "netctl version" does.
	got, err := exec.Command("/usr/bin/netctl", "--version").CombinedOutput()
	if err != nil || !bytes.Equal(got, built) || !strings.HasPrefix(string(got), "netctl ") {
		t.Errorf("/usr/bin/netctl --version: %q, %v; the built netctl version: %q", got, err, built)
	}
	// The installed netctl runs the installed netctl-full for the
	// exporter: only the full build's exporter checks --scrape-timeout.
	out, err = exec.Command("/usr/bin/netctl", "exporter", "--scrape-timeout", "1ms").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "--scrape-timeout 1ms: out of range") {
		t.Errorf("/usr/bin/netctl exporter --scrape-timeout 1ms (through /usr/libexec/netctl/netctl-full): %v\n%s", err, out)
	}
	for _, page := range []string{"netctl", "netctl-attach", "netctl-hook", "netctl-exporter"} {
		out, err := exec.Command("man", "-w", page).CombinedOutput()
		want := "/usr/share/man/man1/" + page + ".1.gz"
		if err != nil || strings.TrimSpace(string(out)) != want {
			t.Errorf("man -w %s: %q, %v; want %s", page, out, err, want)
		}
	}
	// The installed bash completion completes a command.
	script := `source /usr/share/bash-completion/completions/netctl; COMP_WORDS=(netctl exp); COMP_CWORD=1; _netctl; echo "${COMPREPLY[*]}"`
	if out, err := exec.Command("bash", "--norc", "-c", script).CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "exporter" {
		t.Errorf("bash completion of 'netctl exp': %q, %v", out, err)
	}
	// zsh's compinit finds _netctl on its own fpath.
	if zsh, err := exec.LookPath("zsh"); err == nil {
		// -D: no dump file. compinit -d FILE replaces FILE (rm, then
		// write): -d /dev/null once made /dev/null a regular file on the
		// machine, breaking every later test that read it.
		out, err := exec.Command(zsh, "-fc", "autoload -Uz compinit; compinit -u -D; print -r -- ${_comps[netctl]}").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "_netctl" {
			t.Errorf("zsh compinit: netctl completes with %q (%v), want _netctl", out, err)
		}
		if st, err := os.Stat("/dev/null"); err != nil || st.Mode()&os.ModeCharDevice == 0 {
			t.Fatalf("/dev/null is no longer a character device (%v, %v): restore it with rm /dev/null; mknod -m 666 /dev/null c 1 3", st.Mode(), err)
		}
	}
	if sa, err := exec.LookPath("systemd-analyze"); err == nil {
		units, _ := filepath.Glob("/usr/lib/systemd/system/netctl-*")
		if len(units) < 5 {
			t.Errorf("units installed: %v", units)
		}
		out, err := exec.Command(sa, append([]string{"verify"}, units...)...).CombinedOutput()
		if err != nil || len(bytes.TrimSpace(out)) > 0 {
			t.Errorf("systemd-analyze verify %v: %v\n%s", units, err, out)
		}
	} else {
		t.Log("no systemd-analyze: units not verified")
	}

	// Remove: the conffiles stay, everything else goes; purge: they go too.
	dpkg(t, "-r", "netctl")
	if _, err := os.Lstat("/usr/bin/netctl"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("/usr/bin/netctl after dpkg -r: %v", err)
	}
	for _, c := range []string{"/etc/netctl/hook.json.example", "/etc/default/netctl-exporter"} {
		if _, err := os.Stat(c); err != nil {
			t.Errorf("conffile %s gone after dpkg -r (only --purge removes it): %v", c, err)
		}
	}
	dpkg(t, "--purge", "netctl")
	installed = false
	if st := pkgStatus(t); st != "" {
		t.Errorf("after dpkg --purge: status %q", st)
	}
	for _, p := range paths {
		if existed[p] {
			continue
		}
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is left after dpkg --purge (%v)", p, err)
		}
	}
}

// pkgStatus is dpkg's status of netctl, "" when it knows none (or only
// "not-installed").
func pkgStatus(t *testing.T) string {
	out, err := exec.Command("dpkg-query", "-W", "-f=${Status}", "netctl").Output()
	if err != nil {
		return "" // no package named netctl
	}
	s := strings.TrimSpace(string(out))
	if strings.HasSuffix(s, " not-installed") {
		return ""
	}
	return s
}

// debPaths lists the absolute paths the package holds (dpkg-deb -c).
func debPaths(t *testing.T, deb string) []string {
	out, err := exec.Command("dpkg-deb", "--fsys-tarfile", deb).Output()
	if err != nil {
		t.Fatalf("dpkg-deb --fsys-tarfile: %v", err)
	}
	cmd := exec.Command("tar", "-t")
	cmd.Stdin = bytes.NewReader(out)
	list, err := cmd.Output()
	if err != nil {
		t.Fatalf("tar -t: %v", err)
	}
	var paths []string
	sc := bufio.NewScanner(bytes.NewReader(list))
	for sc.Scan() {
		p := filepath.Clean("/" + strings.TrimPrefix(sc.Text(), "./"))
		if p != "/" {
			paths = append(paths, p)
		}
	}
	if len(paths) < 10 {
		t.Fatalf("the package lists %v", paths)
	}
	return paths
}

// dpkg runs dpkg, waiting (up to 2 minutes) while another dpkg or apt
// holds its lock: the machine is shared.
func dpkg(t *testing.T, args ...string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		cmd := exec.Command("dpkg", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		out, err := cmd.CombinedOutput()
		if err == nil {
			return
		}
		if bytes.Contains(out, []byte("lock")) && time.Now().Before(deadline) {
			time.Sleep(3 * time.Second)
			continue
		}
		t.Fatalf("dpkg %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
