package l2

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"fmt"
	"strings"

	"github.com/netctl/netctl/test/vm"
)

// initScript is the L2 guest's /init.
//
//go:embed init.sh
var initScript []byte

// Modules the L2 initramfs loads, in order (virtio_pci is built in).
var Modules = []string{"failover", "net_failover", "virtio_net"}

// Initramfs returns a gzipped newc initramfs: busybox (static), the
// modules (decompressed .ko images by name, loaded in the order of
// Modules) and the L2 init.
func Initramfs(busybox []byte, mods map[string][]byte) ([]byte, error) {
	for _, m := range Modules {
		if len(mods[m]) == 0 {
			return nil, fmt.Errorf("l2: no %s module for the initramfs (want %s)", m, strings.Join(Modules, ", "))
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
	c.File("init", 0o755, initScript)
	c.File("bin/busybox", 0o755, busybox)
	for _, m := range Modules {
		c.File("mods/"+m+".ko", 0o644, mods[m])
	}
	if err := c.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
