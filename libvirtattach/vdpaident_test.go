package libvirtattach

import (
	"context"
	"errors"
	"testing"

	"github.com/netctl/netctl/hostnic"
	"github.com/netctl/netctl/state"
)

// unreadableHost makes vdpa devices whose identity cannot be read, and
// fails DeleteVDPA when delErr is set.
type unreadableHost struct {
	hostnic.Host
	deleted []string
	delErr  error
}

func (h *unreadableHost) VDPAExists(string) bool { return false }
func (h *unreadableHost) CreateVDPA(context.Context, hostnic.VDPASpec) (string, error) {
	return "/dev/vhost-vdpa-7", nil
}
func (h *unreadableHost) VDPAIdentity(string) (uint64, error) {
	return 0, errors.New("sysfs: input/output error")
}
func (h *unreadableHost) DeleteVDPA(_ context.Context, name string) error {
	if h.delErr != nil {
		return h.delErr
	}
	h.deleted = append(h.deleted, name)
	return nil
}

// TestCreateVDPAUnreadableIdentityUndo: a device made whose identity
// cannot be read comes back with an error and the undo that deletes it,
// so the caller's rollback deletes it and, when that fails too, keeps the
// record that names it. Before, createVDPA deleted it itself and, when
// that delete failed, the rollback removed the record: a netctl-ID device
// was left that nothing named (review).
func TestCreateVDPAUnreadableIdentityUndo(t *testing.T) {
	h := &unreadableHost{delErr: errors.New("device busy")}
	nic := &state.NIC{ID: "net2"}
	_, undo, err := createVDPA(context.Background(), Request{ID: "net2", Mgmtdev: "vduse"}, h, nic, nil, func() error { return nil })
	if err == nil || undo == nil {
		t.Fatalf("createVDPA with an unreadable identity: err %v, undo %v (want an error and the undo)", err, undo != nil)
	}
	if nic.VDPA == nil || !nic.VDPA.Created || nic.VDPA.Name != "netctl-net2" {
		t.Fatalf("the record does not name the device made: %+v", nic.VDPA)
	}
	if uerr := undo(context.Background()); uerr == nil {
		t.Errorf("undo with a failing delete: no error (the rollback would remove the record)")
	}
	h.delErr = nil
	if uerr := undo(context.Background()); uerr != nil || len(h.deleted) != 1 || h.deleted[0] != "netctl-net2" {
		t.Errorf("undo: %v, deleted %v (want netctl-net2 deleted)", uerr, h.deleted)
	}
}
