package vm

import (
	"bytes"
	"compress/gzip"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

//go:embed init.sh
var initScript []byte

// modprobeScript is /bin/netctl-modprobe in the guest: it loads an
// on-demand module after its dependencies (listed in /mods/NAME.load).
var modprobeScript = []byte(`#!/bin/busybox sh
[ -f "/mods/$1.load" ] || { echo "netctl-modprobe: $1 is not an on-demand module of this image" >&2; exit 1; }
while read -r m; do
  grep -q "^$m " /proc/modules && continue
  insmod "/mods/$m.ko" || { echo "netctl-modprobe: insmod $m failed" >&2; exit 1; }
done < "/mods/$1.load"
`)

// Image is a bootable kernel and initramfs of the matrix, with what its
// initramfs loads.
type Image struct {
	Kernel  *Kernel  `json:"-"`
	Name    string   `json:"kernel"`  // Kernel.Name
	Package string   `json:"package"` // Debian package it came from
	Release string   `json:"release"` // uname -r in the guest
	Vmlinuz string   `json:"vmlinuz"`
	Initrd  string   `json:"initrd"`
	Modules []string `json:"modules"` // loaded at boot, in order
	// OnDemand are loadable in the guest with netctl-modprobe NAME.
	OnDemand []string `json:"on_demand,omitempty"`
	Builtin  []string `json:"builtin"` // wanted but built in
	Missing  []string `json:"missing"` // wanted, absent from this kernel
	Cache    string   `json:"-"`       // cache directory
	InitSum  string   `json:"init_sum"`
}

// Summary says in one line what the image has.
func (img *Image) Summary() string {
	s := fmt.Sprintf("kernel %s: %s (%s), %d modules", img.Name, img.Package, img.Release, len(img.Modules))
	if len(img.Missing) > 0 {
		s += "; not in this kernel: " + strings.Join(img.Missing, " ")
	}
	return s
}

// initSum changes whenever what goes into an initramfs besides the kernel's
// own files changes, so that cached images are rebuilt.
func initSum(k *Kernel) string {
	b := append(append(append([]byte{}, initScript...), modprobeScript...), strings.Join(k.OnDemand, ",")...)
	return fmt.Sprintf("%x", len(b)) + fmt.Sprintf("-%08x", crc(b))
}

func crc(b []byte) uint32 {
	var h uint32 = 2166136261
	for _, c := range b {
		h = (h ^ uint32(c)) * 16777619
	}
	return h
}

// Prepare returns the image for kernel k, downloading and building what the
// cache lacks. It is idempotent: with everything cached it runs no apt
// command and builds nothing. Progress goes to log.
func Prepare(ctx context.Context, cache string, k *Kernel, log io.Writer) (*Image, error) {
	unlock, err := lockDir(cache)
	if err != nil {
		return nil, err
	}
	defer unlock()

	dir := filepath.Join(cache, "kernel-"+k.Name)
	meta := filepath.Join(dir, "image.json")
	if img, err := loadImage(meta, k, cache); err == nil {
		return img, nil
	}

	a, err := newApt(ctx, cache, k, log)
	if err != nil {
		return nil, err
	}
	pkg, err := a.kernelPackage(ctx)
	if err != nil {
		return nil, err
	}
	deb, err := a.download(ctx, filepath.Join(cache, "debs"), pkg)
	if err != nil {
		return nil, err
	}
	root := filepath.Join(dir, "root")
	fmt.Fprintf(log, "vm: unpacking %s\n", filepath.Base(deb))
	if err := extract(ctx, deb, root); err != nil {
		return nil, err
	}
	busybox, err := fetchBusybox(ctx, cache, log)
	if err != nil {
		return nil, err
	}
	tree, err := openModuleTree(root)
	if err != nil {
		return nil, err
	}
	vmlinuz := filepath.Join(root, "boot", "vmlinuz-"+tree.release)
	if _, err := os.Stat(vmlinuz); err != nil {
		return nil, fmt.Errorf("vm: %s has no kernel image: %w", pkg, err)
	}
	set, err := tree.resolve(k.Modules)
	if err != nil {
		return nil, err
	}
	for _, r := range k.Required {
		for _, m := range set.Missing {
			if m == r {
				return nil, fmt.Errorf("vm: kernel %s (%s) lacks module %s, which its tests need", k.Name, pkg, r)
			}
		}
	}
	onDemand := map[string]*moduleSet{}
	for _, m := range k.OnDemand {
		s, err := tree.resolve([]string{m})
		if err != nil {
			return nil, err
		}
		if len(s.Missing) > 0 {
			return nil, fmt.Errorf("vm: kernel %s (%s) lacks module %s, which its tests need", k.Name, pkg, m)
		}
		onDemand[m] = s
	}
	img := &Image{Kernel: k, Name: k.Name, Package: pkg, Release: tree.release, Vmlinuz: vmlinuz,
		Initrd: filepath.Join(dir, "initrd.gz"), Modules: set.Order, OnDemand: k.OnDemand, Builtin: set.Builtin, Missing: set.Missing,
		Cache: cache, InitSum: initSum(k)}
	if err := writeInitrd(img.Initrd, busybox, k, set, onDemand); err != nil {
		return nil, err
	}
	b, _ := json.MarshalIndent(img, "", "  ")
	if err := os.WriteFile(meta, b, 0o644); err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "vm: %s\n", img.Summary())
	return img, nil
}

func loadImage(meta string, k *Kernel, cache string) (*Image, error) {
	b, err := os.ReadFile(meta)
	if err != nil {
		return nil, err
	}
	img := &Image{}
	if err := json.Unmarshal(b, img); err != nil {
		return nil, err
	}
	if img.InitSum != initSum(k) {
		return nil, fmt.Errorf("init script changed")
	}
	for _, p := range []string{img.Vmlinuz, img.Initrd} {
		if _, err := os.Stat(p); err != nil {
			return nil, err
		}
	}
	img.Kernel, img.Cache = k, cache
	return img, nil
}

// fetchBusybox returns a static busybox from Debian's busybox-static.
func fetchBusybox(ctx context.Context, cache string, log io.Writer) (string, error) {
	bin := filepath.Join(cache, "busybox", "bin", "busybox")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	a := &apt{log: log}
	deb, err := a.download(ctx, filepath.Join(cache, "debs"), "busybox-static")
	if err != nil {
		return "", err
	}
	if err := extract(ctx, deb, filepath.Join(cache, "busybox")); err != nil {
		return "", err
	}
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("vm: busybox-static has no bin/busybox: %w", err)
	}
	return bin, nil
}

func writeInitrd(path, busybox string, k *Kernel, set *moduleSet, onDemand map[string]*moduleSet) error {
	bb, err := os.ReadFile(busybox)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	gz, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	c := &cpioWriter{w: gz}
	for _, d := range []string{"bin", "sbin", "dev", "proc", "sys", "tmp", "run", "root", "host", "results", "mods", "etc"} {
		c.Dir(d)
	}
	c.CharDev("dev/console", 5, 1)
	c.CharDev("dev/null", 1, 3)
	c.File("init", 0o755, initScript)
	c.File("bin/busybox", 0o755, bb)
	c.File("etc/netctl-vm-kernel", 0o644, []byte(k.Name+"\n"))
	c.File("mods/order", 0o644, []byte(strings.Join(set.Order, "\n")+"\n"))
	written := map[string]bool{}
	for _, m := range set.Order {
		c.File("mods/"+m+".ko", 0o644, set.Images[m])
		written[m] = true
	}
	c.File("bin/netctl-modprobe", 0o755, modprobeScript)
	for name, s := range onDemand {
		c.File("mods/"+name+".load", 0o644, []byte(strings.Join(s.Order, "\n")+"\n"))
		for _, m := range s.Order {
			if !written[m] {
				c.File("mods/"+m+".ko", 0o644, s.Images[m])
				written[m] = true
			}
		}
	}
	if err := c.Close(); err != nil {
		return err
	}
	if err := gz.Close(); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
