// Package guest is a test fixture: a real QEMU on this host (TCG, machine
// pc or q35, -cpu max,erms=off) booting Debian's 6.12 kernel with the
// test/vm busybox initramfs, a QMP socket, and an agent in the guest that
// runs shell commands for the test. Tests hotplug NICs into it over QMP
// (raw qmp.Client here; netctl attach in cmd/netctl) and ask the guest
// what it sees: the NIC with a given MAC (WaitNIC, WaitNICGone), its
// queues (Queues), the feature word its driver acknowledged (Features),
// addresses and pings (SetAddr, Ping), anything else (Exec).
//
// Lifecycle: call Boot from the test goroutine after testenv.Host, so that
// QEMU runs in the test's network namespace; use QMP() with one qmp.Client
// at a time (QEMU's monitor takes one client); Close the client, then the
// Guest, which powers the guest off, waits for QEMU and removes the
// guest's directory. With Options.Paused QEMU starts with -S: hotplug,
// then cont, then WaitReady. Boot takes one of the machine-wide VM slots
// of test/vm for the guest's whole life.
//
// The agent (agent.go) polls a 9p share every 50 ms for command files;
// the host polls for the status every 10 ms. virtio_net is a module in
// Debian's kernels and is loaded before the agent says it is ready.
// Hotplug needs nothing else: acpiphp (pc, and q35's default) and pciehp
// (q35 with ICH9-LPC.acpi-pci-hotplug-with-bridge-support=off) are built
// into 6.12.
//
// The guest's virtio-net driver turns on min(queue pairs, online vCPUs)
// queue pairs, and /sys/class/net/IF/queues shows only those: a 4-queue
// NIC in a 1-vCPU guest shows rx-0 and tx-0 (its acked word still has MQ).
// Give the guest Options.SMP = queues to see them all.
//
// Timings on this 2-core host under TCG (QEMU 7.2, kernel 6.12, measured
// 2026-12-01 by the TestHost* tests here, which log them as "timing:"):
//
//	boot to agent ready, 1 vCPU              3.5-4.0 s (cont to ready: 3.7 s)
//	boot to agent ready, 4 vCPUs             5.9 s
//	Exec round trip                          84 ms
//	device_add to the NIC in the guest       pc 0.16-0.52 s; q35 ACPI 0.07-0.11 s; q35 pciehp 0.2-0.4 s
//	3 pings guest to host (ARP first)        0.5-0.7 s
//	3 pings host to guest                    0.4 s
//	device_del to DEVICE_DELETED             pc 0.2-0.4 s; q35 ACPI 0.1 s; q35 pciehp 6.2-7.2 s
//	                                         (pciehp waits 5 s after the attention button)
//
// A whole test (boot, plug, pings, unplug, power off) takes 5-10 s; a boot
// waits longer (12 s seen) when other test VMs hold the machine's slots.
//
// What QEMU 7.2 and the 6.12 guest do with hotplug, found here:
//   - pc: ACPI hotplug on the root bus; a repeated device_del is accepted
//     and the unplug still ends once.
//   - q35: a NIC needs bus=<a pcie-root-port>: device_add without bus
//     fails with "Bus 'pcie.0' does not support hotplugging". QEMU 7.2's
//     default there is ACPI hotplug for the root ports (acpiphp), which
//     behaves like pc. With ICH9-LPC.acpi-pci-hotplug-with-bridge-support=off
//     the guest's pciehp drives the port: an unplug takes 6-7 s (the
//     attention button's 5 s), a device_del repeated at once gets "already
//     in the process of unplug", and one repeated after QEMU's 5 s window,
//     while the power indicator still blinks, gets "Hot-unplug failed:
//     guest is busy (power indicator blinking)"; the unplug then still ends.
//     A detach that retries every 5 s must treat both as "in progress".
package guest
