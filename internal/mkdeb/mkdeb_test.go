package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

const repoRoot = "../.."

func TestDebVersion(t *testing.T) {
	// Untagged builds upgrade in commit order (dpkg and apt take a
	// lower version for a downgrade): the commit count orders them, not
	// the hash.
	if _, err := exec.LookPath("dpkg"); err == nil {
		older, err1 := debVersion("fffffff", 946)
		newer, err2 := debVersion("0000000-dirty", 947)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if err := exec.Command("dpkg", "--compare-versions", older, "lt", newer).Run(); err != nil {
			t.Errorf("dpkg: %s is not older than %s (commit 946 before 947)", older, newer)
		}
		tagged, _ := debVersion("v0.1.0", 950)
		if err := exec.Command("dpkg", "--compare-versions", newer, "lt", tagged).Run(); err != nil {
			t.Errorf("dpkg: %s is not older than the first tag's %s", newer, tagged)
		}
	}
	// git describe's output, and the commit count (git rev-list --count
	// HEAD; 0 when unknown).
	for _, tc := range []struct {
		in      string
		commits int
		want    string
	}{
		{"v1.2.3", 0, "1.2.3"},
		{"v1.2.3-dirty", 0, "1.2.3+dirty"},
		{"v1.2.3-4-gabc1234", 90, "1.2.3+4.gabc1234"},
		{"v1.2.3-4-gabc1234-dirty", 0, "1.2.3+4.gabc1234.dirty"},
		{"v1.2.3-rc1", 0, "1.2.3~rc1"},
		{"v1.2.3-rc1-2-gabc1234", 0, "1.2.3~rc1+2.gabc1234"},
		{"6087c36", 0, "0~g6087c36"},
		{"6087c36", 947, "0~947.g6087c36"},
		{"abc1234-dirty", 0, "0~gabc1234+dirty"},
		{"abc1234-dirty", 12, "0~12.gabc1234+dirty"},
	} {
		got, err := debVersion(tc.in, tc.commits)
		if err != nil || got != tc.want {
			t.Errorf("debVersion(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "dev", "release_1", "v1 2", strings.Repeat("1", 200)} {
		if v, err := debVersion(bad, 1); err == nil {
			t.Errorf("debVersion(%q) = %q, want an error", bad, v)
		}
	}
}

// TestDebMatchesMakeInstall: the package holds exactly what make install
// puts under DESTDIR with PREFIX=/usr (man pages gzipped), and dpkg-deb
// reads the package nfpm wrote: name, version, arch, conffiles, scripts.
func TestDebMatchesMakeInstall(t *testing.T) {
	mk, err := exec.LookPath("make")
	if err != nil {
		if os.Getenv("NETCTL_VM_DEPS") != "" {
			t.Fatalf("make missing under make test: %v", err)
		}
		t.Skip("no make")
	}
	tmp := t.TempDir()
	dest := filepath.Join(tmp, "dest")
	cmd := exec.Command(mk, "-C", repoRoot, "install", "DESTDIR="+dest, "PREFIX=/usr", "BIN="+filepath.Join(tmp, "bin"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	var installed []string
	filepath.Walk(dest, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			installed = append(installed, strings.TrimPrefix(p, dest))
		}
		return nil
	})
	its, err := items(repoRoot, filepath.Join(tmp, "bin", "netctl"))
	if err != nil {
		t.Fatal(err)
	}
	var packaged []string
	for _, it := range its {
		packaged = append(packaged, strings.TrimSuffix(it.Dst, ".gz"))
	}
	sort.Strings(installed)
	sort.Strings(packaged)
	if strings.Join(installed, "\n") != strings.Join(packaged, "\n") {
		t.Errorf("make install PREFIX=/usr installed:\n%s\nthe package holds:\n%s", strings.Join(installed, "\n"), strings.Join(packaged, "\n"))
	}
	// make uninstall removes every file make install put there but the
	// (perhaps edited) /etc/default/netctl-exporter.
	un := exec.Command(mk, "-C", repoRoot, "uninstall", "DESTDIR="+dest, "PREFIX=/usr", "BIN="+filepath.Join(tmp, "bin"))
	if out, err := un.CombinedOutput(); err != nil {
		t.Fatalf("make uninstall: %v\n%s", err, out)
	}
	var left []string
	filepath.Walk(dest, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			left = append(left, strings.TrimPrefix(p, dest))
		}
		return nil
	})
	if strings.Join(left, " ") != "/etc/default/netctl-exporter" {
		t.Errorf("after make uninstall: %v", left)
	}
	if _, err := os.Stat(filepath.Join(dest, "usr/libexec/netctl")); !os.IsNotExist(err) {
		t.Errorf("make uninstall left usr/libexec/netctl: %v", err)
	}
	if out, err := exec.Command(mk, "-C", repoRoot, "install", "DESTDIR="+dest, "PREFIX=/usr", "BIN="+filepath.Join(tmp, "bin")).CombinedOutput(); err != nil {
		t.Fatalf("make install again: %v\n%s", err, out)
	}
	// make install's units name BINDIR's netctl.
	b, err := os.ReadFile(filepath.Join(dest, "usr/lib/systemd/system/netctl-exporter.service"))
	if err != nil || !strings.Contains(string(b), "ExecStart=/usr/bin/netctl exporter") {
		t.Errorf("installed netctl-exporter.service: %v\n%s", err, b)
	}

	path, err := build(repoRoot, filepath.Join(tmp, "bin", "netctl"), "v1.2.3-4-gabc1234-dirty", 0, "amd64", filepath.Join(tmp, "out"), time.Unix(1700000000, 0))
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(path) != "netctl_1.2.3+4.gabc1234.dirty_amd64.deb" {
		t.Errorf("package file %s", path)
	}
	dd, err := exec.LookPath("dpkg-deb")
	if err != nil {
		t.Log("no dpkg-deb: the package is not read back")
		return
	}
	out, err := exec.Command(dd, "-f", path, "Package", "Version", "Architecture", "Recommends").CombinedOutput()
	if err != nil {
		t.Fatalf("dpkg-deb -f: %v: %s", err, out)
	}
	want := "Package: netctl\nVersion: 1.2.3+4.gabc1234.dirty\nArchitecture: amd64\nRecommends: qemu-system-x86\n"
	if string(out) != want {
		t.Errorf("dpkg-deb -f: %q, want %q", out, want)
	}
	ctl := filepath.Join(tmp, "control")
	if out, err := exec.Command(dd, "-e", path, ctl).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -e: %v: %s", err, out)
	}
	conf, _ := os.ReadFile(filepath.Join(ctl, "conffiles"))
	if string(conf) != "/etc/default/netctl-exporter\n/etc/netctl/hook.json.example\n" {
		t.Errorf("conffiles: %q", conf)
	}
	for _, s := range []string{"postinst", "prerm", "postrm"} {
		if fi, err := os.Stat(filepath.Join(ctl, s)); err != nil || fi.Mode()&0o111 == 0 {
			t.Errorf("maintainer script %s: %v", s, err)
		}
	}
	out, err = exec.Command(dd, "-c", path).CombinedOutput()
	if err != nil {
		t.Fatalf("dpkg-deb -c: %v", err)
	}
	for _, it := range its {
		if !strings.Contains(string(out), " ."+it.Dst+"\n") {
			t.Errorf("package lacks %s:\n%s", it.Dst, out)
		}
	}
}

// TestUnitsDocumentation: every unit's Documentation= man page is one
// make docs writes, and a service names the page of the command it runs
// (ExecStart=/usr/bin/netctl CMD: netctl-CMD(1)), so systemctl help UNIT
// opens the right page.
func TestUnitsDocumentation(t *testing.T) {
	units, err := filepath.Glob(filepath.Join(repoRoot, "deploy/systemd/netctl-*"))
	if err != nil || len(units) == 0 {
		t.Fatalf("no units: %v", err)
	}
	manRef := regexp.MustCompile(`^man:([a-z0-9-]+)\(1\)$`)
	for _, u := range units {
		b, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		var docs []string
		cmd := ""
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "Documentation="); ok {
				docs = append(docs, strings.Fields(v)...)
			}
			if v, ok := strings.CutPrefix(l, "ExecStart=/usr/bin/netctl "); ok {
				cmd = strings.Fields(v)[0]
			}
		}
		name := filepath.Base(u)
		if len(docs) == 0 {
			t.Errorf("%s: no Documentation=", name)
		}
		for _, d := range docs {
			m := manRef.FindStringSubmatch(d)
			if m == nil {
				continue // a URL
			}
			if _, err := os.Stat(filepath.Join(repoRoot, "docs/man", m[1]+".1")); err != nil {
				t.Errorf("%s: Documentation=%s: no such page in docs/man", name, d)
			}
		}
		if cmd != "" && !slices.Contains(docs, "man:netctl-"+cmd+"(1)") {
			t.Errorf("%s runs netctl %s but its Documentation= is %v, not man:netctl-%s(1)", name, cmd, docs, cmd)
		}
	}
}

// TestUnitsWritablePaths: a ReadWritePaths= directory that is not
// optional ("-") is made by the unit itself (ExecStartPre=+.../mkdir -p
// DIR, outside the sandbox) before its command's namespace is set up:
// systemd fails the unit (226/NAMESPACE) when it is missing, and
// tmpfiles.d makes /run/netctl only at boot (make install does not run
// it), so a timer enabled right after make install would fail until the
// next boot.
func TestUnitsWritablePaths(t *testing.T) {
	units, err := filepath.Glob(filepath.Join(repoRoot, "deploy/systemd/netctl-*.service"))
	if err != nil || len(units) == 0 {
		t.Fatalf("no units: %v", err)
	}
	for _, u := range units {
		b, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		var made []string
		var paths []string
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "ExecStartPre=+"); ok {
				if f := strings.Fields(v); len(f) >= 3 && filepath.Base(f[0]) == "mkdir" && slices.Contains(f, "-p") {
					made = append(made, f[len(f)-1])
				}
			}
			if v, ok := strings.CutPrefix(l, "ReadWritePaths="); ok {
				paths = append(paths, strings.Fields(v)...)
			}
		}
		for _, p := range paths {
			if !slices.Contains(made, strings.TrimPrefix(p, "-")) {
				t.Errorf("%s: ReadWritePaths=%s is not made by the unit (ExecStartPre=+/bin/mkdir -p %s)",
					filepath.Base(u), p, strings.TrimPrefix(p, "-"))
			}
		}
	}
}

// TestMakeDebArch: make deb labels the package with the architecture its
// netctl is built for (GOARCH), not always amd64: an arm64 build was an
// "amd64" package dpkg would install on the wrong machine.
func TestMakeDebArch(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatal("make missing: apt-get install make")
	}
	cmd := exec.Command("make", "-n", "-C", repoRoot, "deb", "VERSION=v1.0.0", "COMMITS=1")
	cmd.Env = append(os.Environ(), "GOARCH=arm64", "PATH=/usr/local/go/bin:"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n deb: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "-arch arm64") {
		t.Errorf("make -n deb with GOARCH=arm64 packages for another architecture:\n%s", out)
	}
}

// TestMakeInstallPutsFullWhereNetctlLooks: netctl finds netctl-full only
// in BINDIR/../libexec/netctl (cmd/netctl/full.go), so make install puts
// it there whatever else the command line says: a packager's
// LIBEXECDIR=/usr/lib (GNU's variable) or BINDIR of their own.
func TestMakeInstallPutsFullWhereNetctlLooks(t *testing.T) {
	mk, err := exec.LookPath("make")
	if err != nil {
		if os.Getenv("NETCTL_VM_DEPS") != "" {
			t.Fatalf("make missing under make test: %v", err)
		}
		t.Skip("no make")
	}
	for _, c := range []struct {
		vars []string
		want string
	}{
		{[]string{"PREFIX=/usr"}, "/x/usr/bin/../libexec/netctl/netctl-full"},
		{[]string{"PREFIX=/usr", "LIBEXECDIR=/usr/lib"}, "/x/usr/bin/../libexec/netctl/netctl-full"},
		{[]string{"PREFIX=/usr", "BINDIR=/opt/netctl/bin", "LIBEXECDIR=/usr/lib"}, "/x/opt/netctl/bin/../libexec/netctl/netctl-full"},
	} {
		for _, target := range []string{"install", "uninstall"} {
			args := append([]string{"-n", "-C", repoRoot, target, "DESTDIR=/x", "BIN=/b"}, c.vars...)
			out, err := exec.Command(mk, args...).CombinedOutput()
			if err != nil {
				t.Fatalf("make %v: %v\n%s", args, err, out)
			}
			if !strings.Contains(string(out), " "+c.want+"\n") && !strings.Contains(string(out), " "+c.want+" ") {
				t.Errorf("make %s %v does not name %s:\n%s", target, c.vars, c.want, out)
			}
		}
	}
}
