package libvirtattach

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/hostnic"
	"github.com/netctl/netctl/state"
)

// tapHost records DeleteTap.
type tapHost struct {
	hostnic.Host
	deleted []string
}

func (h *tapHost) DeleteTap(name string, _ int) (bool, error) {
	h.deleted = append(h.deleted, name)
	return true, nil
}

// TestCleanGoneOnlyThisLibvirt: detach of a domain the connected
// libvirtd does not know cleans only records made through that same
// libvirt URI. A record of a domain of that name on another libvirtd
// (qemu:///system vs qemu:///session, or another host's) is that running
// domain's NIC: its tap is left and the error names the record's URI.
// Before, a detach given the wrong --libvirt deleted the tap of a guest
// still running on the other daemon.
func TestCleanGoneOnlyThisLibvirt(t *testing.T) {
	store, err := state.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const uuid = "6a4f3b1e-0d2c-4e8f-9a7b-5c6d7e8f9a0b"
	n := &state.NIC{Schema: state.Schema, VM: "web1", ID: "net1", Netdev: "hostua-netctl-net1", Backend: "userspace", Queues: 1,
		MAC: "52:54:00:00:00:01", Status: state.StatusAttached, Attached: time.Now().UTC(),
		Tap:     &state.Link{Name: "nctl0", Ifindex: 7, Created: true},
		Libvirt: &state.Libvirt{URI: "qemu:///system", UUID: uuid, Alias: "ua-netctl-net1"}}
	if err := store.Create(n); err != nil {
		t.Fatal(err)
	}
	h := &tapHost{}
	err = cleanGone(context.Background(), store, h, "qemu:///session", DetachRequest{Domain: "web1", ID: "net1"})
	if err == nil || !strings.Contains(err.Error(), "qemu:///system") {
		t.Errorf("detach through another libvirt: %v (want a refusal naming qemu:///system)", err)
	}
	if len(h.deleted) != 0 {
		t.Errorf("deleted %v through another libvirt", h.deleted)
	}
	if _, err := store.Load(n.Key(), "net1"); err != nil {
		t.Errorf("record after detach through another libvirt: %v", err)
	}
	// Through its own libvirt (which no longer knows the domain): gone.
	if err := cleanGone(context.Background(), store, h, "qemu:///system", DetachRequest{Domain: uuid, ID: "net1"}); err != nil {
		t.Fatal(err)
	}
	if len(h.deleted) != 1 {
		t.Errorf("deleted %v, want nctl0", h.deleted)
	}
}
