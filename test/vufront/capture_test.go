package vufront

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/netctl/netctl/vhostuser"
)

// TestQEMUCaptureDecodes: every message QEMU 7.2 sent in
// TestHostQEMUHandshake's recorded run (testdata/qemu-7.2-handshake, the
// fuzz seeds for vhostuser.Decode) decodes, and the memory table and ring
// files carry the fds their payload says.
func TestQEMUCaptureDecodes(t *testing.T) {
	files, err := filepath.Glob("testdata/qemu-7.2-handshake/*.bin")
	if err != nil || len(files) < 40 {
		t.Fatalf("%d seed files (%v), want the recorded handshake", len(files), err)
	}
	seen := map[vhostuser.Request]int{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < 1+vhostuser.HeaderSize {
			t.Fatalf("%s: %d bytes", f, len(b))
		}
		h := b[1 : 1+vhostuser.HeaderSize]
		m := &vhostuser.Message{Header: vhostuser.Header{Request: vhostuser.Request(binary.LittleEndian.Uint32(h)),
			Flags: vhostuser.Flags(binary.LittleEndian.Uint32(h[4:])), Size: binary.LittleEndian.Uint32(h[8:])},
			Payload: b[1+vhostuser.HeaderSize:], FDs: make([]int, b[0])}
		if _, err := vhostuser.Decode(m); err != nil {
			t.Errorf("%s: %v", filepath.Base(f), err)
		}
		seen[m.Request]++
	}
	for _, r := range []vhostuser.Request{vhostuser.GetFeatures, vhostuser.SetProtocolFeatures, vhostuser.SetMemTable,
		vhostuser.SetVringAddr, vhostuser.SetVringKick, vhostuser.SetVringErr, vhostuser.SetVringEnable} {
		if seen[r] == 0 {
			t.Errorf("the capture has no %v", r)
		}
	}
}
