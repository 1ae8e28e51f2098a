package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/goreleaser/nfpm/v2/files"
)

// item is one file of the package: where it comes from (under the
// repository's root, or the binary), where it goes, its mode and
// whether it is a conffile.
type item struct {
	Src, Dst string
	Mode     os.FileMode
	Conf     bool
	Gzip     bool // a man page: gzipped into the stage (Debian policy)
}

// items lists the package's files: make install's with PREFIX=/usr,
// units under /usr/lib/systemd/system, tmpfiles under /usr/lib/tmpfiles.d.
func items(root, bin string) ([]item, error) {
	out := []item{
		{Src: bin, Dst: "/usr/bin/netctl", Mode: 0o755},
		// The commands the split netctl runs it for (cmd/netctl/full.go).
		{Src: filepath.Join(filepath.Dir(bin), "netctl-full"), Dst: "/usr/libexec/netctl/netctl-full", Mode: 0o755},
	}
	pages, err := filepath.Glob(filepath.Join(root, "docs/man/*.1"))
	if err != nil || len(pages) == 0 {
		return nil, fmt.Errorf("mkdeb: no man pages under %s/docs/man: run make docs (%v)", root, err)
	}
	sort.Strings(pages)
	for _, p := range pages {
		out = append(out, item{Src: p, Dst: "/usr/share/man/man1/" + filepath.Base(p) + ".gz", Mode: 0o644, Gzip: true})
	}
	units, err := filepath.Glob(filepath.Join(root, "deploy/systemd/netctl-*"))
	if err != nil || len(units) == 0 {
		return nil, fmt.Errorf("mkdeb: no units under %s/deploy/systemd (%v)", root, err)
	}
	sort.Strings(units)
	for _, u := range units {
		out = append(out, item{Src: u, Dst: "/usr/lib/systemd/system/" + filepath.Base(u), Mode: 0o644})
	}
	out = append(out,
		item{Src: filepath.Join(root, "completion/netctl.bash"), Dst: "/usr/share/bash-completion/completions/netctl", Mode: 0o644},
		item{Src: filepath.Join(root, "completion/_netctl"), Dst: "/usr/share/zsh/vendor-completions/_netctl", Mode: 0o644},
		item{Src: filepath.Join(root, "deploy/tmpfiles.d/netctl.conf"), Dst: "/usr/lib/tmpfiles.d/netctl.conf", Mode: 0o644},
		item{Src: filepath.Join(root, "deploy/etc/hook.json.example"), Dst: "/etc/netctl/hook.json.example", Mode: 0o644, Conf: true},
		item{Src: filepath.Join(root, "deploy/default/netctl-exporter"), Dst: "/etc/default/netctl-exporter", Mode: 0o644, Conf: true},
	)
	for _, it := range out {
		if fi, err := os.Stat(it.Src); err != nil {
			return nil, fmt.Errorf("mkdeb: %w", err)
		} else if !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("mkdeb: %s is not a regular file", it.Src)
		}
	}
	return out, nil
}

// contents turns items into nfpm's contents, gzipping man pages into
// stage (reproducibly: no name, no time in the gzip header).
func contents(its []item, stage string, mtime time.Time) (files.Contents, error) {
	var c files.Contents
	for _, it := range its {
		src := it.Src
		if it.Gzip {
			b, err := os.ReadFile(it.Src)
			if err != nil {
				return nil, fmt.Errorf("mkdeb: %w", err)
			}
			var z bytes.Buffer
			w, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
			w.Write(b)
			if err := w.Close(); err != nil {
				return nil, fmt.Errorf("mkdeb: gzip %s: %w", it.Src, err)
			}
			src = filepath.Join(stage, filepath.Base(it.Dst))
			if err := os.WriteFile(src, z.Bytes(), 0o644); err != nil {
				return nil, fmt.Errorf("mkdeb: %w", err)
			}
		}
		typ := files.TypeFile
		if it.Conf {
			typ = files.TypeConfig
		}
		c = append(c, &files.Content{
			Source: src, Destination: it.Dst, Type: typ,
			FileInfo: &files.ContentFileInfo{Owner: "root", Group: "root", Mode: it.Mode, MTime: mtime},
		})
	}
	return c, nil
}

// debVersion turns git describe's output into a Debian version: a tag
// v1.2.3 is 1.2.3, v1.2.3-4-gabc1234 is 1.2.3+4.gabc1234, a bare commit
// abc1234 (no tag yet) is 0~N.gabc1234 with N the commit count (commits;
// hashes alone do not order builds, so dpkg and apt would take a newer
// build for a downgrade), 0~gabc1234 when it is unknown (0); -dirty
// becomes +dirty (or .dirty).
func debVersion(describe string, commits int) (string, error) {
	d := strings.TrimSpace(describe)
	dirty := strings.HasSuffix(d, "-dirty")
	d = strings.TrimSuffix(d, "-dirty")
	if d == "" || len(d) > 128 {
		return "", fmt.Errorf("mkdeb: version %.40q: pass git describe's output", describe)
	}
	var v string
	parts := strings.Split(d, "-")
	switch {
	case isHex(d) && len(d) >= 4 && commits > 0:
		v = "0~" + strconv.Itoa(commits) + ".g" + d
	case isHex(d) && len(d) >= 4:
		v = "0~g" + d
	case len(parts) >= 3 && strings.HasPrefix(parts[len(parts)-1], "g") && isHex(parts[len(parts)-1][1:]):
		n := len(parts)
		v = strings.TrimPrefix(strings.Join(parts[:n-2], "-"), "v") + "+" + parts[n-2] + "." + parts[n-1]
	default:
		v = strings.TrimPrefix(d, "v")
	}
	if dirty {
		if strings.Contains(v, "+") {
			v += ".dirty"
		} else {
			v += "+dirty"
		}
	}
	// Debian: starts with a digit; letters, digits and . + ~ only (a
	// hyphen would start the revision).
	if v == "" || v[0] < '0' || v[0] > '9' {
		return "", fmt.Errorf("mkdeb: version %.40q does not start with a digit: tag releases vX.Y.Z", describe)
	}
	v = strings.ReplaceAll(v, "-", "~")
	for _, r := range v {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || strings.ContainsRune(".+~", r)) {
			return "", fmt.Errorf("mkdeb: version %.40q: %q is not allowed in a Debian version", describe, r)
		}
	}
	return v, nil
}

func isHex(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}
