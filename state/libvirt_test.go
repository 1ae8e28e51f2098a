package state

import (
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// TestLibvirtRecord: a libvirt domain's NIC is stored under its UUID
// (lv=UUID@ID.json), needs no QEMU pid or QMP socket, and a key no VM
// name can take; a bad UUID is refused.
func TestLibvirtRecord(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const uuid = "0f0e0d0c-0b0a-0908-0706-050403020100"
	n := &NIC{Schema: Schema, VM: "web1", ID: "net1", Netdev: "hostua-netctl-net1", Backend: "userspace", Queues: 1,
		MAC: "52:54:00:00:00:01", Status: StatusAttached, Attached: time.Now().UTC(),
		Libvirt: &Libvirt{URI: "qemu:///system", UUID: uuid, Alias: "ua-netctl-net1"}}
	if err := s.Save(n); err != nil {
		t.Fatal(err)
	}
	if _, err := filepath.Glob(filepath.Join(s.Dir, "nics", "lv="+uuid+"@net1.json")); err != nil {
		t.Fatal(err)
	}
	got, err := s.Load(LibvirtKey(uuid), "net1")
	if err != nil || got.Libvirt == nil || got.Libvirt.UUID != uuid || got.VM != "web1" {
		t.Fatalf("Load: %+v %v", got, err)
	}
	if _, err := s.Load(VMKey("web1"), "net1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("the record under the name's key: %v (want not found: the UUID keys it)", err)
	}
	for _, name := range []string{"lv=" + uuid, "lv", "lv=x"} {
		if VMKey(name) == LibvirtKey(uuid) {
			t.Errorf("VM name %q takes the libvirt key", name)
		}
	}
	bad := *n
	bad.Libvirt = &Libvirt{UUID: "WEB1"}
	if err := s.Save(&bad); !errors.Is(err, ErrInvalid) {
		t.Errorf("a record with a bad UUID: %v", err)
	}
	noPID := *n
	noPID.Libvirt = nil
	if err := s.Save(&noPID); !errors.Is(err, ErrInvalid) {
		t.Errorf("a QEMU record without pid or socket: %v", err)
	}
}
