package hook

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
)

// TestPrepareSaysVDPAMACDiffers: QEMU gives the guest a vdpa device's
// own MAC, and a VDUSE device keeps its owner's whatever the XML says:
// prepare (which cannot rewrite the XML) says which MAC the guest will
// see, in its notes and log, and still starts the domain; a device whose
// MAC is the interface's gives no note. Before, nothing said so (the
// libvirt face's VM test saw the guest on 02:00:00:00:0d:01 while the XML
// said another).
func TestPrepareSaysVDPAMACDiffers(t *testing.T) {
	f := newFake(t)
	h, log, vd := newTestHook(t, f)
	f.vdpaMACs = map[string]net.HardwareAddr{"vm1vdpa0": {0x02, 0, 0, 0, 0x0d, 0x01}}
	res, err := h.Run(context.Background(), "netctl-all", "prepare", "begin", bytes.NewReader(allXML(t, vd)))
	if err != nil {
		t.Fatal(err)
	}
	want := "vdpa device vm1vdpa0 has MAC 02:00:00:00:0d:01, which the guest sees"
	if !strings.Contains(strings.Join(res.Notes, "\n"), want) || !strings.Contains(log.String(), want) {
		t.Errorf("notes %q, log %q: want %q", res.Notes, log.String(), want)
	}
	if _, err := h.Run(context.Background(), "netctl-all", "release", "end", bytes.NewReader(allXML(t, vd))); err != nil {
		t.Fatal(err)
	}
	f.vdpaMACs = map[string]net.HardwareAddr{"vm1vdpa0": {0x52, 0x54, 0, 0xaa, 0, 0x02}}
	log.Reset()
	res, err = h.Run(context.Background(), "netctl-all", "prepare", "begin", bytes.NewReader(allXML(t, vd)))
	if err != nil || strings.Contains(strings.Join(res.Notes, "\n")+log.String(), "which the guest sees") {
		t.Errorf("same MAC: %v, notes %q", err, res.Notes)
	}
}
