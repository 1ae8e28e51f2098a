// Command mkdeb builds netctl's Debian package with nfpm (as a library):
// no root, no network beyond the module proxy, no dpkg-deb. "make deb"
// runs it with the binary "make build" made (same -ldflags and
// -buildvcs as a plain build, so netctl --version says the same):
//
//	go run ./internal/mkdeb -bin bin/netctl -version "$(git describe --tags --always --dirty)" \
//		-commits "$(git rev-list --count HEAD)" -out bin/
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/goreleaser/nfpm/v2"
	"github.com/goreleaser/nfpm/v2/deb"
)

func main() {
	root := flag.String("root", ".", "the repository's root")
	bin := flag.String("bin", "bin/netctl", "the netctl binary to package")
	version := flag.String("version", "", "git describe's output (the Makefile's VERSION)")
	commits := flag.Int("commits", 0, "the commit count (git rev-list --count HEAD): orders untagged builds")
	arch := flag.String("arch", "amd64", "the Debian architecture")
	out := flag.String("out", "bin", "the directory to write NAME_VERSION_ARCH.deb to")
	flag.Parse()
	path, err := build(*root, *bin, *version, *commits, *arch, *out, mtime())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(path)
}

// mtime is SOURCE_DATE_EPOCH's time (the Makefile passes the commit's),
// else now.
func mtime() time.Time {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil && n > 0 {
			return time.Unix(n, 0).UTC()
		}
	}
	return time.Now().UTC().Truncate(time.Second)
}

// build writes the package into outDir and returns its path.
func build(root, bin, describe string, commits int, arch, outDir string, mt time.Time) (string, error) {
	v, err := debVersion(describe, commits)
	if err != nil {
		return "", err
	}
	its, err := items(root, bin)
	if err != nil {
		return "", err
	}
	stage, err := os.MkdirTemp("", "mkdeb-")
	if err != nil {
		return "", fmt.Errorf("mkdeb: %w", err)
	}
	defer os.RemoveAll(stage)
	c, err := contents(its, stage, mt)
	if err != nil {
		return "", err
	}
	info := packageInfo(root, v, arch, mt)
	info.Contents = c
	info = nfpm.WithDefaults(info)
	if err := nfpm.PrepareForPackager(info, "deb"); err != nil {
		return "", fmt.Errorf("mkdeb: %w", err)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return "", fmt.Errorf("mkdeb: %w", err)
	}
	path := filepath.Join(outDir, deb.Default.ConventionalFileName(info))
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return "", fmt.Errorf("mkdeb: %w", err)
	}
	if err := deb.Default.Package(info, f); err != nil {
		f.Close()
		os.Remove(tmp)
		return "", fmt.Errorf("mkdeb: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("mkdeb: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("mkdeb: %w", err)
	}
	return path, nil
}

func packageInfo(root, version, arch string, mt time.Time) *nfpm.Info {
	return &nfpm.Info{
		Name:          "netctl",
		Arch:          arch,
		Platform:      "linux",
		Version:       version,
		VersionSchema: "none",
		Section:       "net",
		Priority:      "optional",
		Maintainer:    "netctl maintainers <netctl@users.noreply.github.com>",
		Homepage:      "https://github.com/netctl/netctl",
		Description: "set up and explain in-kernel virtio-net data paths (vhost-net, vDPA)\n" +
			"netctl gives running QEMU VMs virtio-net NICs on the best data path the host\n" +
			"has (vDPA, vhost-net, QEMU's userspace virtio-net), explains every feature\n" +
			"bit, hooks into libvirt, and exports per-queue Prometheus metrics.",
		MTime: mt,
		Overridables: nfpm.Overridables{
			// A static Go binary (CGO_ENABLED=0): no shared library.
			Recommends: []string{"qemu-system-x86"},
			Suggests:   []string{"libvirt-daemon-system", "prometheus"},
			Scripts: nfpm.Scripts{
				PostInstall: filepath.Join(root, "deploy/debian/postinst"),
				PreRemove:   filepath.Join(root, "deploy/debian/prerm"),
				PostRemove:  filepath.Join(root, "deploy/debian/postrm"),
			},
			Deb: nfpm.Deb{Compression: "xz"},
		},
	}
}
