package hostnic

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/test/vduse"
	"github.com/netctl/netctl/vdpa"
)

// TestVMVDPACreatePublishDelete: through a VDUSE device, CreateVDPA
// refuses an unknown management device and (without MACOptional) a MAC
// the management device does not take, leaving no device; with
// MACOptional it adds the device without the MAC, binds it to vhost_vdpa
// and returns its /dev/vhost-vdpa-N (a character device). A second
// CreateVDPA of the name is refused (ErrConflict and EEXIST) and leaves
// the device as it was. VDPAIdentity is the sysfs inode, which a device
// deleted and added again under the name does not keep. Publish links
// the node, OpenVDPA opens it once (a second open is ErrBusy), Unpublish
// and DeleteVDPA remove link and device, and a second DeleteVDPA is no
// error. On a kernel without vDPA, CreateVDPA fails with ErrNotAvailable
// and leaves nothing.
func TestVMVDPACreatePublishDelete(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h := Real{}
	testenv.Require(t, "vduse", func(m *testenv.Missing) {
		_, err := h.CreateVDPA(ctx, VDPASpec{Name: "netctl-hn0", Mgmtdev: "vduse"})
		m.Err(err, errs.ErrNotAvailable, "vdpa")
		m.Check(!h.VDPAExists("netctl-hn0"), "a vdpa device was left")
	})
	d, err := vduse.Create(vduse.Config{Name: "netctl-hn0"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	defer h.DeleteVDPA(context.Background(), "netctl-hn0")

	if _, err := h.CreateVDPA(ctx, VDPASpec{Name: "netctl-hn0", Mgmtdev: "nosuch"}); !errors.Is(err, errs.ErrNotAvailable) {
		t.Errorf("CreateVDPA on a management device that is not there: %v, want ErrNotAvailable", err)
	}
	mac := net.HardwareAddr{0x52, 0x54, 0, 0x95, 0xdb, 0xc0}
	if _, err := h.CreateVDPA(ctx, VDPASpec{Name: "netctl-hn0", Mgmtdev: "vduse", MAC: mac}); err == nil {
		t.Errorf("CreateVDPA with a MAC VDUSE does not take (MACOptional false) succeeded")
	}
	if h.VDPAExists("netctl-hn0") {
		t.Fatalf("a refused CreateVDPA left vdpa device netctl-hn0")
	}

	vhost, err := h.CreateVDPA(ctx, VDPASpec{Name: "netctl-hn0", Mgmtdev: "vduse", MAC: mac, MACOptional: true})
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(vhost, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR {
		t.Fatalf("CreateVDPA returned %s: %v (mode %o), want a character device", vhost, err, st.Mode)
	}
	if drv, err := vdpa.BoundDriver("netctl-hn0"); err != nil || drv != vdpa.DriverVhostVDPA {
		t.Errorf("bound to %q, %v; want %s", drv, err, vdpa.DriverVhostVDPA)
	}
	desc, err := h.DescribeVDPA(ctx, "netctl-hn0")
	if err != nil || desc.Driver != vdpa.DriverVhostVDPA || len(desc.Features) == 0 {
		t.Errorf("DescribeVDPA: %+v, %v", desc, err)
	}
	id, err := h.VDPAIdentity("netctl-hn0")
	if err != nil || id == 0 {
		t.Fatalf("VDPAIdentity: %d, %v", id, err)
	}
	_, err = h.CreateVDPA(ctx, VDPASpec{Name: "netctl-hn0", Mgmtdev: "vduse"})
	if !errors.Is(err, errs.ErrConflict) || !errors.Is(err, unix.EEXIST) {
		t.Errorf("second CreateVDPA: %v, want ErrConflict and EEXIST", err)
	}
	if again, err := h.VDPAIdentity("netctl-hn0"); err != nil || again != id {
		t.Errorf("after the refused CreateVDPA: identity %d, %v; want %d (untouched)", again, err, id)
	}

	link := filepath.Join(t.TempDir(), "vdpa", "netctl-hn0")
	if err := CheckUnpublished(link); err != nil {
		t.Fatal(err)
	}
	if err := Publish(link, vhost); err != nil {
		t.Fatal(err)
	}
	fd, path, err := h.OpenVDPA(ctx, "netctl-hn0")
	if err != nil || path != vhost {
		t.Fatalf("OpenVDPA: %s, %v; want %s", path, err, vhost)
	}
	if fd2, _, err := h.OpenVDPA(ctx, "netctl-hn0"); !errors.Is(err, errs.ErrBusy) {
		if err == nil {
			h.CloseFD(fd2)
		}
		t.Errorf("second OpenVDPA: %v, want ErrBusy", err)
	}
	if err := h.CloseFD(fd); err != nil {
		t.Fatal(err)
	}
	if err := Unpublish(link, vhost); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(link); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Unpublish left %s: %v", link, err)
	}
	if err := h.DeleteVDPA(ctx, "netctl-hn0"); err != nil {
		t.Fatal(err)
	}
	if h.VDPAExists("netctl-hn0") {
		t.Errorf("DeleteVDPA left the device")
	}
	if _, err := h.VDPAIdentity("netctl-hn0"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("VDPAIdentity of a deleted device: %v, want ErrNotExist", err)
	}
	if err := h.DeleteVDPA(ctx, "netctl-hn0"); err != nil {
		t.Errorf("second DeleteVDPA: %v", err)
	}

	// Each step after the add fails in turn: the device is deleted again.
	for step, fail := range map[string]func(){
		"bind": func() { bindVhostVDPA = func(string) error { return fmt.Errorf("injected bind failure") } },
		"node": func() {
			waitNode = func(context.Context, string) (string, error) { return "", fmt.Errorf("injected: no node") }
		},
	} {
		fail()
		_, err := h.CreateVDPA(ctx, VDPASpec{Name: "netctl-hn0", Mgmtdev: "vduse"})
		bindVhostVDPA, waitNode = bindVhost, waitVhostNode
		if err == nil || !strings.Contains(err.Error(), "injected") {
			t.Errorf("CreateVDPA with its %s step failing: %v", step, err)
		}
		if h.VDPAExists("netctl-hn0") {
			t.Fatalf("CreateVDPA whose %s step failed left the device", step)
		}
	}

	// Added again under the name: another identity.
	if _, err := h.CreateVDPA(ctx, VDPASpec{Name: "netctl-hn0", Mgmtdev: "vduse"}); err != nil {
		t.Fatal(err)
	}
	if again, err := h.VDPAIdentity("netctl-hn0"); err != nil || again == id {
		t.Errorf("identity of the device added again: %d, %v; want other than %d", again, err, id)
	}
	if err := h.DeleteVDPA(ctx, "netctl-hn0"); err != nil {
		t.Fatal(err)
	}
}
