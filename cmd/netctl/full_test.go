package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// splitTags are make build's tags for bin/netctl (Makefile build-netctl).
const splitTags = "netctl_split,urfave_cli_no_docs"

// TestSplitBuildLeavesLargeLibrariesOut: the netctl every hook, CNI and
// attach call runs links none of the libraries only the exporter and the
// KubeVirt sidecar need, nor libvirt's RPC client (go-libvirt, which
// brings golang.org/x/crypto/ssh and crypto/tls), so it does not
// initialise them.
func TestSplitBuildLeavesLargeLibrariesOut(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-tags", splitTags, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list -deps listed only %d packages", len(deps))
	}
	for _, d := range deps {
		for _, bad := range []string{
			"github.com/prometheus/", "google.golang.org/grpc", "google.golang.org/protobuf",
			"github.com/russross/blackfriday", "github.com/cpuguy83/go-md2man",
			"github.com/netctl/netctl/exporter", "github.com/netctl/netctl/kubevirt/sidecar", "net/http",
			"github.com/digitalocean/go-libvirt", "github.com/netctl/netctl/libvirtdom/rpc", "golang.org/x/crypto/", "crypto/tls",
		} {
			if strings.HasPrefix(d, bad) {
				t.Errorf("the split netctl links %s", d)
			}
		}
	}
	// The full build has them (this test would pass on a tree without them).
	out, err = exec.Command("go", "list", "-deps", "-tags", "urfave_cli_no_docs", ".").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "github.com/prometheus/client_golang/prometheus\n") ||
		!strings.Contains(string(out), "google.golang.org/grpc\n") || !strings.Contains(string(out), "github.com/digitalocean/go-libvirt\n") ||
		!strings.Contains(string(out), "github.com/netctl/netctl/libvirtdom/rpc\n") {
		t.Fatalf("the full build lacks the exporter's, the sidecar's or libvirt's libraries: %v", err)
	}
}

func TestFindFull(t *testing.T) {
	root := t.TempDir()
	bin := filepath.Join(root, "usr", "bin")
	libexec := filepath.Join(root, "usr", "libexec", "netctl")
	for _, d := range []string{bin, libexec} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	exe := filepath.Join(bin, "netctl")
	_, err := findFull(exe)
	if err == nil || !strings.Contains(err.Error(), "make install") || !strings.Contains(err.Error(), libexec) {
		t.Fatalf("no netctl-full: %v", err)
	}
	// Beside it (make build's bin/).
	if err := os.WriteFile(filepath.Join(bin, fullName), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := findFull(exe); err != nil || got != filepath.Join(bin, fullName) {
		t.Fatalf("findFull = %q, %v", got, err)
	}
	// PREFIX/libexec/netctl first (make install, the package).
	if err := os.WriteFile(filepath.Join(libexec, fullName), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := findFull(exe); err != nil || got != filepath.Join(libexec, fullName) {
		t.Fatalf("findFull = %q, %v", got, err)
	}
	// Not executable, or a directory: not it.
	os.Chmod(filepath.Join(libexec, fullName), 0o644)
	if got, err := findFull(exe); err != nil || got != filepath.Join(bin, fullName) {
		t.Fatalf("findFull with a non-executable one = %q, %v", got, err)
	}
	os.Remove(filepath.Join(bin, fullName))
	os.Mkdir(filepath.Join(bin, fullName), 0o755)
	if got, err := findFull(exe); err == nil {
		t.Fatalf("findFull took %q", got)
	}
}

// TestSplitRunsFull: the split netctl runs netctl-full for the exporter
// and the KubeVirt sidecar, with the same arguments (the full build's own
// flag checks answer), from the install layout; without netctl-full it
// says what to do and fails.
func TestSplitRunsFull(t *testing.T) {
	root := t.TempDir()
	bin := filepath.Join(root, "bin")
	libexec := filepath.Join(root, "libexec", "netctl")
	split := filepath.Join(bin, "netctl")
	for _, b := range []struct{ tags, out string }{{splitTags, split}, {"urfave_cli_no_docs", filepath.Join(libexec, fullName)}} {
		if out, err := exec.Command("go", "build", "-tags", b.tags, "-o", b.out, ".").CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	// Only the exporter's action checks --scrape-timeout's range.
	r := execNetctl(t, split, "exporter", "--scrape-timeout", "1ms")
	if r.code != exitUsage || !strings.Contains(r.stderr, "--scrape-timeout 1ms: out of range") {
		t.Errorf("split netctl exporter --scrape-timeout 1ms: %+v", r)
	}
	// The sidecar refuses a plan that is not there: its action ran.
	r = execNetctl(t, split, "kubevirt", "sidecar", "--plan", filepath.Join(root, "nothing.json"), "--socket-dir", root)
	if r.code != exitFailure || !strings.Contains(r.stderr, "nothing.json") {
		t.Errorf("split netctl kubevirt sidecar --plan missing: %+v", r)
	}
	// A command that dials libvirt (the split netctl has no libvirt
	// client) is netctl-full's: its Dial answers, naming the socket.
	sock := filepath.Join(root, "no-libvirtd-sock")
	lv := []string{"diagnose", "--vm", "dom", "--libvirt", "qemu+unix:///system?socket=" + sock}
	r = execNetctl(t, split, lv...)
	if r.code != exitFailure || !strings.Contains(r.stderr, "is libvirtd running? socket "+sock) || r.stdout != "" {
		t.Errorf("split netctl diagnose --libvirt (no daemon): %+v", r)
	}
	// What the split netctl runs itself works without netctl-full.
	if err := os.Remove(filepath.Join(libexec, fullName)); err != nil {
		t.Fatal(err)
	}
	if r := execNetctl(t, split, "version"); r.code != exitOK || !strings.HasPrefix(r.stdout, "netctl ") {
		t.Errorf("split netctl version: %+v", r)
	}
	r = execNetctl(t, split, "exporter")
	if r.code != exitFailure || !strings.Contains(r.stderr, "netctl-full") || !strings.Contains(r.stderr, "make install") {
		t.Errorf("split netctl exporter without netctl-full: %+v", r)
	}
	r = execNetctl(t, split, lv...)
	if r.code != exitFailure || !strings.Contains(r.stderr, "netctl-full") || !strings.Contains(r.stderr, "make install") || strings.Contains(r.stderr, "netctl bug") {
		t.Errorf("split netctl diagnose --libvirt without netctl-full: %+v", r)
	}
}

// buildInstall builds the split netctl into root/bin and, with fullTags
// (nil: none built), netctl-full into root/libexec/netctl: make install's
// layout.
func buildInstall(t *testing.T, root string, fullTags *string) (split, full string) {
	t.Helper()
	split = filepath.Join(root, "bin", "netctl")
	full = filepath.Join(root, "libexec", "netctl", fullName)
	builds := []struct{ tags, out string }{{splitTags, split}}
	if fullTags != nil {
		builds = append(builds, struct{ tags, out string }{*fullTags, full})
	}
	for _, b := range builds {
		if out, err := exec.Command("go", "build", "-tags", b.tags, "-o", b.out, ".").CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	return split, full
}

// TestSplitNeverExecsItself: a netctl-full that is in fact a split netctl
// (bin/netctl copied or linked there) would run netctl-full again, and
// again, forever, in the same process: the split netctl refuses to run
// netctl-full from netctl-full's own place, saying what to install.
func TestSplitNeverExecsItself(t *testing.T) {
	root := t.TempDir()
	split, full := buildInstall(t, root, nil)
	for _, how := range []string{"copy", "symlink"} {
		os.Remove(full)
		os.MkdirAll(filepath.Dir(full), 0o755)
		var err error
		if how == "copy" {
			var b []byte
			if b, err = os.ReadFile(split); err == nil {
				err = os.WriteFile(full, b, 0o755)
			}
		} else {
			err = os.Symlink(split, full)
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"exporter"}, {"diagnose", "--vm", "dom", "--libvirt", "qemu+unix:///system?socket=" + filepath.Join(root, "nosock")}} {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			cmd := exec.CommandContext(ctx, split, args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			timedOut := ctx.Err() != nil
			cancel()
			if timedOut {
				t.Fatalf("%s: split netctl %v with a split netctl as netctl-full did not end (it runs itself)", how, args)
			}
			if code := cmd.ProcessState.ExitCode(); code != exitFailure || !strings.Contains(stderr.String(), "is not netctl-full") {
				t.Errorf("%s: split netctl %v with a split netctl as netctl-full: exit %d (%v), stderr %q", how, args, code, err, stderr.String())
			}
		}
	}
}

// TestSplitHandsOverBeforeReadingPlan: attach and diagnose on a libvirt
// domain run netctl-full before they read --plan, which may be a pipe
// (/dev/stdin, <(netctl plan -j ...)) that a second read finds empty.
func TestSplitHandsOverBeforeReadingPlan(t *testing.T) {
	root := t.TempDir()
	tags := "urfave_cli_no_docs"
	split, _ := buildInstall(t, root, &tags)
	plan := execNetctl(t, split, "plan", "-j", "../../policy/testdata/probe-6.1.json", "../../policy/testdata/probe-6.12.json")
	if plan.code != exitOK || !strings.HasPrefix(plan.stdout, "{") {
		t.Fatalf("netctl plan -j: %+v", plan)
	}
	sock := filepath.Join(root, "no-libvirtd-sock")
	uri := "qemu+unix:///system?socket=" + sock
	for _, args := range [][]string{
		{"attach", "--vm", "dom", "--id", "n1", "--libvirt", uri, "--plan", "/dev/stdin"},
		{"diagnose", "--vm", "dom", "--libvirt", uri, "--qemu-monitor", "--plan", "/dev/stdin"},
	} {
		cmd := exec.Command(split, args...)
		var stderr bytes.Buffer
		cmd.Stdin, cmd.Stderr = strings.NewReader(plan.stdout), &stderr // a pipe
		cmd.Run()
		if code := cmd.ProcessState.ExitCode(); code != exitFailure || !strings.Contains(stderr.String(), "is libvirtd running? socket "+sock) {
			t.Errorf("split netctl %v, the plan on a pipe: exit %d, stderr %q", args, code, stderr.String())
		}
	}
}

// TestSplitRunsOnlyItsOwnFull: after a partial upgrade (one of the two
// binaries replaced), netctl-full of another version would parse the
// split netctl's command line by its own rules; it refuses, naming both
// versions, before it runs anything. The same version runs.
func TestSplitRunsOnlyItsOwnFull(t *testing.T) {
	root := t.TempDir()
	split := filepath.Join(root, "bin", "netctl")
	full := filepath.Join(root, "libexec", "netctl", fullName)
	for _, b := range []struct{ tags, ver, out string }{{splitTags, "v9.1.0", split}, {"urfave_cli_no_docs", "v9.0.0", full}} {
		if out, err := exec.Command("go", "build", "-tags", b.tags, "-ldflags", "-X main.version="+b.ver, "-o", b.out, ".").CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	r := execNetctl(t, split, "exporter", "--scrape-timeout", "1ms")
	if r.code != exitFailure || !strings.Contains(r.stderr, "v9.0.0") || !strings.Contains(r.stderr, "v9.1.0") || strings.Contains(r.stderr, "scrape-timeout") {
		t.Errorf("split netctl v9.1.0 running netctl-full v9.0.0: %+v", r)
	}
	// netctl-full run by hand takes any command line.
	if r := execNetctl(t, full, "exporter", "--scrape-timeout", "1ms"); r.code != exitUsage {
		t.Errorf("netctl-full v9.0.0 by hand: %+v", r)
	}
	// The same version (of one build): netctl-full's own checks answer.
	if out, err := exec.Command("go", "build", "-tags", "urfave_cli_no_docs", "-ldflags", "-X main.version=v9.1.0", "-o", full, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if r := execNetctl(t, split, "exporter", "--scrape-timeout", "1ms"); r.code != exitUsage || !strings.Contains(r.stderr, "--scrape-timeout 1ms: out of range") {
		t.Errorf("split netctl v9.1.0 running netctl-full v9.1.0: %+v", r)
	}
}
