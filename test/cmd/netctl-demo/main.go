// Command netctl-demo is make demo: netctl attach on real QEMU guests,
// told as a reader follows it (each command as a user types it, and its
// real output).
//
// The host half boots a QEMU guest on this host (TCG, Debian's 6.12
// kernel, a busybox initramfs; test/guest) in a network namespace the
// demo creates, runs bin/netctl attach on it (this host has no
// vhost-net: the fallback chain says why, and the NIC lands on QEMU's
// userspace virtio-net), pings across the NIC both ways, shows netctl
// diagnose and netctl list, detaches, and shows that nothing is left.
//
// The VM half runs in the 6.12 test VM (bin/netctl-vm run), which has
// vhost-net: a paused firmware-only nested QEMU (test/l2) gets a NIC
// from netctl attach with the backend left to auto (vhost-net chosen),
// iPXE's DHCP crosses it both ways to a test DHCP server on the tap,
// netctl diagnose shows vhost started, and detach shows what happens when
// no OS answers an unplug (a timeout, the NIC marked), then completes
// after a reset.
//
// It exits 1 when any step fails, after undoing what it did (guest
// powered off, QEMU stopped, namespace and state removed). Run it as
// root, after make build and make vm-prepare:
//
//	netctl-demo [-part all|host|vm]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/netctl/netctl/test/vm"
)

func main() {
	os.Exit(run())
}

func run() int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "netctl-demo: %v\n", err)
		return 1
	}
	bin := filepath.Dir(self)
	part := flag.String("part", "all", "all, host (the guest on this host) or vm (inside the test VM; netctl-demo runs it there itself)")
	netctl := flag.String("netctl", filepath.Join(bin, "netctl"), "the netctl binary (make build)")
	netctlVM := flag.String("netctl-vm", filepath.Join(bin, "netctl-vm"), "the VM harness's command (make build)")
	busybox := flag.String("busybox", "", "a static busybox for the host's ping (default: the VM cache's)")
	section := flag.Int("section", 0, "number the sections from this one on (the VM half continues the host's)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	n := newNarrator(os.Stdout)
	n.section = *section
	if *part == "vm" {
		n.clock = "VM half: "
	}
	fail := func(err error) int {
		if ctx.Err() != nil {
			fmt.Fprintf(os.Stdout, "\nnetctl-demo: interrupted after %.1f s: %v\n", time.Since(n.start).Seconds(), err)
			return 1
		}
		fmt.Fprintf(os.Stdout, "\nnetctl-demo: FAILED after %.1f s: %v\n", time.Since(n.start).Seconds(), err)
		return 1
	}
	if os.Geteuid() != 0 {
		return fail(fmt.Errorf("run as root (make demo does): netctl creates taps and opens /dev/vhost-net"))
	}
	if _, err := os.Stat(*netctl); err != nil {
		return fail(fmt.Errorf("%w: build it with make build", err))
	}

	switch *part {
	case "vm":
		vctx, cancel := context.WithTimeout(ctx, 150*time.Second)
		defer cancel()
		if err := runVMHalf(vctx, n, vmConfig{Netctl: *netctl, MAC: "52:54:00:de:01:02"}); err != nil {
			return fail(err)
		}
		return 0
	case "host", "all":
	default:
		return fail(fmt.Errorf("-part %q: use all, host or vm", *part))
	}

	cfg := defaultHostConfig()
	cfg.Netctl, cfg.Busybox = *netctl, *busybox
	if cfg.Busybox == "" {
		cache, err := vm.DefaultCacheDir()
		if err != nil {
			return fail(err)
		}
		cfg.Busybox = filepath.Join(cache, "busybox", "bin", "busybox")
	}
	if _, err := os.Stat(cfg.Busybox); err != nil {
		return fail(fmt.Errorf("%w: make vm-prepare fetches busybox", err))
	}
	fmt.Printf("netctl demo: netctl attach gives running QEMU guests a NIC (netctl is %s)\n", *netctl)
	hctx, cancel := context.WithTimeout(ctx, 120*time.Second)
	err = runHostHalf(hctx, n, cfg)
	cancel()
	if err != nil {
		return fail(err)
	}
	if *part == "all" {
		if _, err := os.Stat(*netctlVM); err != nil {
			return fail(fmt.Errorf("%w: build it with make build", err))
		}
		n.heading("Now the vhost-net path, inside the 6.12 test VM (this host's / is /host there)")
		argv := []string{*netctlVM, "run", "-kernel", "6.12", "-smp", "2", "-timeout", "4m", "--",
			"/host" + self, "-part", "vm", "-netctl", "/host" + *netctl, "-section", fmt.Sprint(n.section)}
		c := command{Show: strings.Join(argv, " "), Argv: argv}
		if err := n.stream(ctx, c); err != nil {
			return fail(err)
		}
	}
	fmt.Printf("\nnetctl-demo: ok, every step passed, nothing left behind; %.1f s in all\n", time.Since(n.start).Seconds())
	return 0
}

// stream runs c with its output going straight to the narrative (the VM
// half narrates itself). On ctx's end the command gets SIGTERM, which the
// VM harness answers by stopping the VM.
func (n *narrator) stream(ctx context.Context, c command) error {
	n.mu.Lock()
	fmt.Fprintf(n.w, "$ %s\n", c.Show)
	n.mu.Unlock()
	cmd := exec.CommandContext(ctx, c.Argv[0], c.Argv[1:]...)
	cmd.Stdout, cmd.Stderr = n.w, n.w
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w", c.Show, err)
	}
	return nil
}
