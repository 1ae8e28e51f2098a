package l2

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/netctl/netctl/test/vm"
)

// initScript is the L2 guest's /init.
//
//go:embed init.sh
var initScript []byte

// Modules the L2 initramfs can load, dependencies first. The virtio core
// is built into 6.12 and modular in 6.1: Optional says which may be
// absent (built in).
var Modules = []string{"virtio_ring", "virtio_pci_modern_dev", "virtio_pci_legacy_dev", "virtio", "virtio_pci",
	"failover", "net_failover", "virtio_net"}

// Optional modules are built into some kernels.
var Optional = map[string]bool{"virtio_ring": true, "virtio_pci_modern_dev": true, "virtio_pci_legacy_dev": true, "virtio": true, "virtio_pci": true}

// Module is one decompressed .ko image.
type Module struct {
	Name  string
	Image []byte
}

// File is one more file for an initramfs: its path (no leading slash),
// permission bits and contents.
type File struct {
	Path string
	Perm uint32
	Data []byte
}

// Initramfs returns a gzipped newc initramfs: busybox (static), the
// modules (loaded in the order given, by /mods/order) and the L2 init.
// failover, net_failover and virtio_net must be there.
func Initramfs(busybox []byte, mods []Module) ([]byte, error) {
	return InitramfsWith(initScript, busybox, mods)
}

// InitramfsWith is Initramfs with init as /init and files added (a
// nested guest's own init and agent: test/bench/l2guest).
func InitramfsWith(init, busybox []byte, mods []Module, files ...File) ([]byte, error) {
	have := map[string]bool{}
	for _, m := range mods {
		if len(m.Image) == 0 {
			return nil, fmt.Errorf("l2: module %s is empty", m.Name)
		}
		have[m.Name] = true
	}
	for _, m := range Modules {
		if !have[m] && !Optional[m] {
			return nil, fmt.Errorf("l2: no %s module for the initramfs (it needs failover, net_failover and virtio_net)", m)
		}
	}
	if len(busybox) == 0 {
		return nil, fmt.Errorf("l2: no busybox for the initramfs")
	}
	var buf bytes.Buffer
	gz, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	c := vm.NewCPIO(gz)
	for _, d := range []string{"bin", "dev", "proc", "sys", "mods"} {
		c.Dir(d)
	}
	c.CharDev("dev/console", 5, 1)
	c.File("init", 0o755, init)
	c.File("bin/busybox", 0o755, busybox)
	for _, f := range files {
		c.File(f.Path, f.Perm, f.Data)
	}
	var order []string
	for _, m := range mods {
		c.File("mods/"+m.Name+".ko", 0o644, m.Image)
		order = append(order, m.Name)
	}
	c.File("mods/order", 0o644, []byte(strings.Join(order, "\n")+"\n"))
	if err := c.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// LocalModules reads Modules from /mods, where the test VM's initramfs
// keeps its own (the L2 guest runs the L1 kernel), leaving out the
// Optional ones that this kernel has built in.
func LocalModules() ([]Module, error) {
	var mods []Module
	for _, m := range Modules {
		b, err := os.ReadFile("/mods/" + m + ".ko")
		if errors.Is(err, os.ErrNotExist) && Optional[m] {
			continue // built in
		}
		if err != nil {
			return nil, fmt.Errorf("the test VM's initramfs has no %s module: %w", m, err)
		}
		mods = append(mods, Module{m, b})
	}
	return mods, nil
}
