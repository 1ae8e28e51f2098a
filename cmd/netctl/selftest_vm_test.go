package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/vhostnet/selftest"
)

// TestVMSelftestCommand runs netctl selftest on the VM's kernel: exit 0,
// and what it prints, as text and as JSON, is what the kernel read back
// (vhost-net's offer on this kernel, the tap's 12-byte header, flags and
// the offloads set), not what the run meant to set.
func TestVMSelftestCommand(t *testing.T) {
	k := testenv.VM(t)
	offer := map[string]string{"6.12": "0x1033d008000", "6.1": "0x33d008000"}[k.Name]
	if offer == "" {
		t.Fatalf("no expectation for kernel %s", k.Name)
	}
	var stdout, stderr bytes.Buffer
	if code := runMain([]string{"netctl", "selftest", "-j", "--queues", "2", "--frames", "200"}, &stdout, &stderr); code != 0 {
		t.Fatalf("selftest -j: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	var r selftest.Report
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("selftest -j printed %q: %v", stdout.String(), err)
	}
	if r.OfferedHex != offer || r.AckedHex != "0x120008000" || r.HeaderSize != 12 || strings.Join(r.TapOffloads, " ") != "csum tso4 tso6" ||
		!strings.HasPrefix(r.Kernel, k.Name) || len(r.Queues) != 2 {
		t.Errorf("report %+v: want vhost-net's offer %s on %s, acked 0x120008000, a 12-byte header, csum tso4 tso6", r, offer, k.Name)
	}
	for _, d := range []selftest.Direction{r.GuestToHost, r.HostToGuest} {
		if d.Planned != 400 || d.Received != 400 || d.Lost+d.Corrupted+d.Duplicate != 0 {
			t.Errorf("%+v, want 400 frames intact", d)
		}
	}
	stdout.Reset()
	stderr.Reset()
	if code := runMain([]string{"netctl", "selftest", "--frames", "100"}, &stdout, &stderr); code != 0 || stderr.Len() != 0 {
		t.Fatalf("selftest: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	wantLines(t, stdout.String(),
		"vhost-net on Linux "+r.Kernel+", 1 queue pair(s)",
		"vhost-net offers:   "+strings.Join(r.OfferedNames, "|")+" ("+offer+", VHOST_GET_FEATURES)",
		"acknowledged:       MRG_RXBUF|EVENT_IDX|VERSION_1 (0x120008000,",
		"seen in effect:     EVENT_IDX MRG_RXBUF",
		"virtio-net header:  12 bytes (TUNGETVNETHDRSZ); tap flags TAP|NO_PI|VNET_HDR",
		"tap offloads:       csum tso4 tso6 (ethtool: tx-checksum-ip-generic tx-tcp-segmentation tx-tcp6-segmentation)",
		"guest→host:  100 of 100 frames intact (0 lost, 0 corrupted, 0 duplicated)",
		"host→guest:  100 of 100 frames intact (0 lost, 0 corrupted, 0 duplicated)",
		"result: ok, every frame arrived once and byte for byte")
	t.Logf("%s", stdout.String())
}
