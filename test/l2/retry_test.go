package l2

import (
	"os"
	"path/filepath"
	"testing"
)

// TestDiedBooting: only a kernel that died before reporting a NIC, in a
// QEMU that has exited, counts as a boot death worth one more start.
func TestDiedBooting(t *testing.T) {
	for _, c := range []struct {
		name, console        string
		exited, reboot, want bool
	}{
		{"double fault in start_kernel", "[   23.588389] traps: PANIC: double fault, error_code: 0x0\n[   23.588389] Kernel panic - not syncing: Fatal exception in interrupt\n", true, false, true},
		{"jump to 0", "[   10.351373] BUG: kernel NULL pointer dereference, address: 0000000000000000\n", true, false, true},
		{"timer check", "[    0.004000] Kernel panic - not syncing: IO-APIC + timer doesn't work!\n", true, false, true},
		{"still running", "[    0.004000] Kernel panic - not syncing: x\n", false, false, false},
		{"died after a NIC came up", "L2-NIC eth0 mac=52:54:00:00:00:01 driver=virtio_net features=0101 uptime=3.10\nKernel panic - not syncing: x\n", true, false, false},
		{"exited without a panic", "L2-ERR no NICs\n", true, false, false},
		// Config.Reboot: QEMU resets the guest instead of exiting; the
		// console alone says it died.
		{"reboot: panicked, QEMU still runs", "[   16.441793] Kernel panic - not syncing: Attempted to kill the idle task!\n", false, true, true},
		{"reboot: died after a NIC came up", "L2-NIC eth0 mac=52:54:00:00:00:01 driver=virtio_net features=0101 uptime=3.10\nKernel panic - not syncing: x\n", false, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			serial := filepath.Join(t.TempDir(), "serial.log")
			if err := os.WriteFile(serial, []byte(c.console), 0o644); err != nil {
				t.Fatal(err)
			}
			g := &Guest{Serial: serial, done: make(chan struct{}), reboot: c.reboot}
			if c.exited {
				close(g.done)
			}
			if got := g.diedBooting(); got != c.want {
				t.Errorf("diedBooting = %v, want %v", got, c.want)
			}
		})
	}
}
