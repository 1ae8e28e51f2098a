package cni

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/netctl/netctl/internal/errs"
)

// TestWriteDeviceInfoExisting: a device-info file already at the path
// is not taken for ADD's: one naming another device (someone else's, or
// a stale one Multus would publish for this pod) fails ADD as a conflict
// and is left as it is, instead of ADD succeeding with the pod told of
// the other device; one naming this very device (left by a killed ADD of
// the attachment, its vhost node possibly another now) is rewritten.
func TestWriteDeviceInfoExisting(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "cni", "net1.json")
	read := func() DeviceInfo {
		t.Helper()
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var d DeviceInfo
		if err := json.Unmarshal(b, &d); err != nil || d.VDPA == nil {
			t.Fatalf("%s: %v", b, err)
		}
		return d
	}
	if err := writeDeviceInfo(p, "netctl-aaaa", "/dev/vhost-vdpa-0"); err != nil {
		t.Fatal(err)
	}
	if err := writeDeviceInfo(p, "netctl-aaaa", "/dev/vhost-vdpa-3"); err != nil {
		t.Fatal(err)
	}
	if d := read(); d.VDPA.Path != "/dev/vhost-vdpa-3" {
		t.Errorf("this device's stale file: path %s, want /dev/vhost-vdpa-3", d.VDPA.Path)
	}
	err := writeDeviceInfo(p, "netctl-bbbb", "/dev/vhost-vdpa-4")
	if !errors.Is(err, errs.ErrConflict) {
		t.Errorf("over another device's file: %v; want ErrConflict", err)
	}
	if d := read(); d.VDPA.ParentDevice != "netctl-aaaa" || d.VDPA.Path != "/dev/vhost-vdpa-3" {
		t.Errorf("another device's file changed: %+v", d.VDPA)
	}
	os.WriteFile(p, []byte("not json"), 0o644)
	if err := writeDeviceInfo(p, "netctl-aaaa", "/dev/vhost-vdpa-0"); !errors.Is(err, errs.ErrConflict) {
		t.Errorf("over a file that is no device-info: %v; want ErrConflict", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "not json" {
		t.Errorf("that file changed: %q", b)
	}
}
