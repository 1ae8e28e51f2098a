package vm

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// apt runs apt-get or apt-cache for one suite: the machine's own sources,
// or, for a suite they lack (trixie on Debian 12), a private configuration
// under the cache that leaves the machine's sources and lists untouched.
type apt struct {
	opts []string // -o options selecting the private configuration
	log  io.Writer
}

const debianKeyring = "/usr/share/keyrings/debian-archive-keyring.gpg"

// newApt prepares apt for kernel k's suite; for a private suite it writes
// the sources file and runs "apt-get update" once (when no lists exist).
func newApt(ctx context.Context, cache string, k *Kernel, log io.Writer) (*apt, error) {
	a := &apt{log: log}
	if !k.Private {
		return a, nil
	}
	dir := filepath.Join(cache, "apt-"+k.Suite)
	lists := filepath.Join(dir, "lists")
	for _, d := range []string{filepath.Join(lists, "partial"), filepath.Join(dir, "cache", "archives", "partial")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	src := filepath.Join(dir, "sources.list")
	line := fmt.Sprintf("deb [signed-by=%s] %s %s main\n", debianKeyring, debianMirror(), k.Suite)
	if err := os.WriteFile(src, []byte(line), 0o644); err != nil {
		return nil, err
	}
	a.opts = []string{
		"-o", "Dir::Etc::SourceList=" + src,
		"-o", "Dir::Etc::SourceParts=/dev/null",
		"-o", "Dir::State::Lists=" + lists,
		"-o", "Dir::Cache=" + filepath.Join(dir, "cache"),
	}
	if m, _ := filepath.Glob(filepath.Join(lists, "*_Packages*")); len(m) == 0 {
		if err := a.update(ctx); err != nil {
			return nil, err
		}
	}
	return a, nil
}

func (a *apt) update(ctx context.Context) error {
	fmt.Fprintf(a.log, "vm: apt-get update (%s)\n", a.describe())
	_, err := a.run(ctx, "", "apt-get", "-q", "update")
	return err
}

func (a *apt) describe() string {
	if a.opts == nil {
		return "the machine's sources"
	}
	return "private sources " + strings.TrimPrefix(a.opts[1], "Dir::Etc::SourceList=")
}

func (a *apt) run(ctx context.Context, dir, prog string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, prog, append(append([]string(nil), a.opts...), args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive", "LC_ALL=C")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("vm: %s %s: %w\n%s", prog, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

var kernelDep = regexp.MustCompile(`\blinux-image-[0-9][^ ,()|]*-amd64\b`)

// kernelPackage finds the versioned package the linux-image-amd64
// metapackage of this suite depends on (linux-image-6.12.NN+deb13-amd64).
// On the machine's own sources it runs apt-get update once if the lists
// do not know the package yet.
func (a *apt) kernelPackage(ctx context.Context) (string, error) {
	for attempt := 0; ; attempt++ {
		out, err := a.run(ctx, "", "apt-cache", "show", "--no-all-versions", "linux-image-amd64")
		if err == nil {
			for _, line := range strings.Split(string(out), "\n") {
				if strings.HasPrefix(line, "Depends:") {
					if m := kernelDep.FindString(line); m != "" {
						return m, nil
					}
				}
			}
			err = fmt.Errorf("vm: linux-image-amd64 (%s) depends on no linux-image-*-amd64 package", a.describe())
		}
		if attempt > 0 {
			return "", err
		}
		if uerr := a.update(ctx); uerr != nil {
			return "", fmt.Errorf("%v (and then %w)", err, uerr)
		}
	}
}

// download fetches pkg's .deb into dir and returns its path. A second call
// finds the file and downloads nothing.
func (a *apt) download(ctx context.Context, dir, pkg string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if m, _ := filepath.Glob(filepath.Join(dir, pkg+"_*.deb")); len(m) > 0 {
		return m[0], nil
	}
	fmt.Fprintf(a.log, "vm: apt-get download %s (%s)\n", pkg, a.describe())
	if _, err := a.run(ctx, dir, "apt-get", "-q", "download", pkg); err != nil {
		// The lists may be older than the archive: refresh once.
		if uerr := a.update(ctx); uerr != nil {
			return "", err
		}
		if _, err := a.run(ctx, dir, "apt-get", "-q", "download", pkg); err != nil {
			return "", err
		}
	}
	m, _ := filepath.Glob(filepath.Join(dir, pkg+"_*.deb"))
	if len(m) == 0 {
		return "", fmt.Errorf("vm: apt-get download %s left no .deb in %s", pkg, dir)
	}
	return m[0], nil
}

// extract unpacks a .deb into dir with dpkg-deb -x.
func extract(ctx context.Context, deb, dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, "dpkg-deb", "-x", deb, dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("vm: dpkg-deb -x %s: %w\n%s", deb, err, out)
	}
	return nil
}

// debianMirror is the Debian mirror the machine's own sources use, so the
// private suite comes from the same place.
func debianMirror() string {
	if f, err := os.Open("/etc/apt/sources.list.d/debian.sources"); err == nil {
		defer f.Close()
		s := bufio.NewScanner(f)
		for s.Scan() {
			line := strings.TrimSpace(s.Text())
			if strings.HasPrefix(line, "URIs:") {
				for _, u := range strings.Fields(strings.TrimPrefix(line, "URIs:")) {
					if strings.HasSuffix(strings.TrimRight(u, "/"), "/debian") {
						return strings.TrimRight(u, "/")
					}
				}
			}
		}
	}
	if b, err := os.ReadFile("/etc/apt/sources.list"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) >= 3 && f[0] == "deb" {
				for _, u := range f[1:] {
					if strings.HasSuffix(strings.TrimRight(u, "/"), "/debian") {
						return strings.TrimRight(u, "/")
					}
				}
			}
		}
	}
	return "http://deb.debian.org/debian"
}
