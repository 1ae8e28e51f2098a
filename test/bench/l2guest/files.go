// Package l2guest is the nested Linux guest the attach and vhost-user
// benches boot inside the test VM (test/l2's QEMU, chrooted in l2.Root):
// its vmlinux and initramfs (busybox, the test VM's virtio-net modules,
// l2agent and init.sh), and the TCP streams the benches run against
// l2agent. Each bench starts QEMU itself with its own options; the QEMU
// process and its fds belong to the bench.
package l2guest

import (
	"bytes"
	"compress/gzip"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/netctl/netctl/test/l2"
	"github.com/netctl/netctl/test/vm"
)

// initScript is the nested guest's /init, with @ADDR01@ and @ADDR02@ for
// the addresses of the NICs whose MAC ends in :01 and :02.
//
//go:embed init.sh
var initScript string

// Init returns the nested guest's /init: addr01 (a CIDR such as
// "10.91.0.2/24") goes on the NIC whose MAC ends in :01, addr02 on the
// one ending in :02.
func Init(addr01, addr02 string) []byte {
	return []byte(strings.NewReplacer("@ADDR01@", addr01, "@ADDR02@", addr02).Replace(initScript))
}

// WriteFiles writes vmlinux (vmlinuz's compressed payload, decompressed)
// and initrd.gz (busybox, the test VM's virtio-net modules, the l2agent
// binary agentBin and init as /init) into dir.
func WriteFiles(ctx context.Context, vmlinuz, agentBin string, init []byte, dir string) error {
	bz, err := os.ReadFile(vmlinuz)
	if err != nil {
		return err
	}
	p, kind, err := l2.Payload(bz)
	if err != nil {
		return fmt.Errorf("%s: %w", vmlinuz, err)
	}
	tool := map[string]string{l2.Zstd: "/usr/bin/zstd", l2.XZ: "/usr/bin/xz", l2.Gzip: "/usr/bin/gzip"}[kind]
	elf, err := l2.Host(ctx, p, tool, "-dc")
	if err != nil {
		return fmt.Errorf("decompress %s: %w", vmlinuz, err)
	}
	if err := os.WriteFile(dir+"/vmlinux", elf, 0o644); err != nil {
		return err
	}
	busybox, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return err
	}
	agent, err := os.ReadFile(agentBin)
	if err != nil {
		return err
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
	c.File("bin/l2agent", 0o755, agent)
	var order []string
	for _, m := range l2.Modules {
		b, err := os.ReadFile("/mods/" + m + ".ko")
		if errors.Is(err, os.ErrNotExist) && l2.Optional[m] {
			continue // built in
		}
		if err != nil {
			return fmt.Errorf("the test VM's initramfs has no %s module: %w", m, err)
		}
		c.File("mods/"+m+".ko", 0o644, b)
		order = append(order, m)
	}
	c.File("mods/order", 0o644, []byte(strings.Join(order, "\n")+"\n"))
	if err := c.Close(); err != nil {
		return err
	}
	if err := gz.Close(); err != nil {
		return err
	}
	return os.WriteFile(dir+"/initrd.gz", buf.Bytes(), 0o644)
}

// Tail is the last n bytes of s (a console log, QEMU's stderr).
func Tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
