// Command vhostuser-bench measures issue 15's benchmarks for make bench
// (BENCH=vhostuser), in the 6.12 test VM, and prints one schema-2 JSON
// line each (test/bench/result):
//
//   - datapath: the vhost-user bridge's data path against direct
//     vhost-net, with the same userspace driver (vhostnet/guest) in the same
//     VM: on one side test/vufront's frontend drives a vhostuser.Bridge
//     (in this process) onto /dev/vhost-net over a tap, on the other
//     vhostnet.NewNIC programs /dev/vhost-net over another tap directly.
//     Guest to host 1500-byte frames and 64 KiB TSO frames, and host to
//     guest 64 KiB GSO frames into mergeable buffers. The kernel does the
//     same work on both sides; only the setup differs (goal: at least
//     0.95x).
//   - nested: a nested Linux guest (the VM's own kernel, busybox and
//     l2agent) with two NICs, one on -netdev vhost-user to the bridge and
//     one on QEMU's own -netdev tap,vhost=on, 512 MiB of shared memfd RAM;
//     TCP streams between the VM's stack and the guest's over each, both
//     ways (goal: the bridge at least 0.95x). Both NICs run without MSI-X
//     (virtio-net-pci.vectors=0): Debian's QEMU 7.2 dies with SIGSEGV when
//     it starts vhost for a vhost-user NIC whose driver uses MSI-X under
//     TCG (virtio_set_status -> vhost_net_start ->
//     msix_set_vector_notifiers), with the bridge and equally with
//     test/vufront's Stub (-nested-stub), so the crash is QEMU's; iPXE
//     (INTx) never hits it. -nested-gdb shows the backtrace.
//   - firstpacket: from starting a firmware-only QEMU (SeaBIOS + iPXE) to
//     the first DHCPDISCOVER on the tap: its NIC on -netdev vhost-user to
//     the bridge against QEMU's own -netdev tap,vhost=on.
//
// Sides run interleaved round by round (A B A B ...), each figure the
// median of its rounds. Nothing here is a test: the figures are recorded,
// not asserted. It runs as root in the VM's own network namespace: all
// traffic stays inside the VM.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/netctl/netctl/test/bench/result"
)

var (
	commit       = flag.String("commit", "", "commit being measured")
	hostLoad     = flag.String("host-load", "", "the host's /proc/loadavg when make bench started")
	only         = flag.String("only", "datapath,firstpacket,nested", "comma-separated: datapath, firstpacket, nested")
	agent        = flag.String("agent", "", "the static l2agent binary (nested)")
	vmlinuz      = flag.String("vmlinuz", "", "the kernel the nested guest boots (nested; default: the test VM's own)")
	streamD      = flag.Duration("stream", 5*time.Second, "duration of one TCP stream round (nested)")
	nestedVU     = flag.Bool("nested-vu", true, "give the nested guest its vhost-user NIC (false: only QEMU's own, to check the guest alone)")
	nestedAppend = flag.String("nested-append", "", "more kernel arguments for the nested guest (debugging)")
	nestedStub   = flag.Bool("nested-stub", false, "serve the nested guest's vhost-user NIC with test/vufront's Stub instead of the bridge (debugging)")
	nestedGDB    = flag.Bool("nested-gdb", false, "run the nested guest's QEMU under gdb and print its backtrace (debugging)")
	verbose      = flag.Bool("v", false, "log the bridge's status after every message (nested)")
	bootWait     = flag.Duration("boot-wait", 7*time.Minute, "how long the nested guest may take to boot (nested)")
	rounds       = flag.Int("rounds", 5, "interleaved rounds per side (at least 5)")
	duration     = flag.Duration("d", 1500*time.Millisecond, "duration of one throughput round")
)

func main() {
	flag.Parse()
	if *rounds < 5 || *rounds > 1000 {
		fatal("-rounds %d: every figure is the median of at least 5 rounds (5 to 1000)", *rounds)
	}
	for _, b := range strings.Split(*only, ",") {
		switch b {
		case "datapath":
			benchDatapath()
		case "firstpacket":
			benchFirstPacket()
		case "nested":
			benchNested()
		default:
			fatal("-only %s: use datapath, firstpacket, nested", b)
		}
	}
}

func emit(l result.Line) { result.Print(result.Finish(l, *commit, *hostLoad)) }

// interleave runs a and b alternately, -rounds times each (result.Interleave).
func interleave(a, b func() float64) (as, bs []float64) { return result.Interleave(*rounds, a, b) }

func fatal(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "vhostuser-bench: "+format+"\n", args...)
	os.Exit(1)
}
