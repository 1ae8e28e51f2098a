// Package l2guest is the nested Linux guest the attach and vhost-user
// benches boot inside the test VM (test/l2's QEMU, chrooted in l2.Root):
// its vmlinux and initramfs (busybox, the test VM's virtio-net modules,
// l2agent and init.sh), and the TCP streams the benches run against
// l2agent. Each bench starts QEMU itself with its own options; the QEMU
// process and its fds belong to the bench.
package l2guest

import (
	"context"
	_ "embed"
	"os"
	"strings"

	"github.com/netctl/netctl/test/l2"
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
	elf, err := l2.Vmlinux(ctx, vmlinuz)
	if err != nil {
		return err
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
	mods, err := l2.LocalModules()
	if err != nil {
		return err
	}
	rd, err := l2.InitramfsWith(init, busybox, mods, l2.File{Path: "bin/l2agent", Perm: 0o755, Data: agent})
	if err != nil {
		return err
	}
	return os.WriteFile(dir+"/initrd.gz", rd, 0o644)
}

// Tail is the last n bytes of s (a console log, QEMU's stderr).
func Tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
