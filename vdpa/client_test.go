package vdpa

import (
	"context"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/genetlink/genltest"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/virtio"
)

// fakeFamily serves a vdpa family with one management device and the
// devices added through it, and records the attributes of each request.
type fakeFamily struct {
	t    *testing.T
	devs map[string]bool
	last map[uint16][]byte
}

func attrs(t *testing.T, b []byte) map[uint16][]byte {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		t.Fatal(err)
	}
	m := map[uint16][]byte{}
	for ad.Next() {
		m[ad.Type()] = ad.Bytes()
	}
	return m
}

func (f *fakeFamily) serve(greq genetlink.Message, nreq netlink.Message) ([]genetlink.Message, error) {
	f.last = attrs(f.t, greq.Data)
	name := strings.TrimRight(string(f.last[linux.VDPA_ATTR_DEV_NAME]), "\x00")
	enc := func(fn func(*netlink.AttributeEncoder)) genetlink.Message {
		ae := netlink.NewAttributeEncoder()
		fn(ae)
		b, _ := ae.Encode()
		return genetlink.Message{Header: genetlink.Header{Command: replyCmd[greq.Header.Command]}, Data: b}
	}
	dev := func(n string) genetlink.Message {
		return enc(func(ae *netlink.AttributeEncoder) {
			ae.String(linux.VDPA_ATTR_DEV_NAME, n)
			ae.String(linux.VDPA_ATTR_MGMTDEV_DEV_NAME, "vduse")
			ae.Uint32(linux.VDPA_ATTR_DEV_ID, 1)
			ae.Uint32(linux.VDPA_ATTR_DEV_VENDOR_ID, 0)
			ae.Uint32(linux.VDPA_ATTR_DEV_MAX_VQS, 2)
			ae.Uint16(linux.VDPA_ATTR_DEV_MAX_VQ_SIZE, 256)
			ae.Uint16(linux.VDPA_ATTR_DEV_MIN_VQ_SIZE, 1)
		})
	}
	switch greq.Header.Command {
	case linux.VDPA_CMD_MGMTDEV_GET:
		return []genetlink.Message{
			enc(func(ae *netlink.AttributeEncoder) {
				ae.String(linux.VDPA_ATTR_MGMTDEV_DEV_NAME, "vduse")
				ae.Uint64(linux.VDPA_ATTR_MGMTDEV_SUPPORTED_CLASSES, 1<<1|1<<2)
			}),
			enc(func(ae *netlink.AttributeEncoder) {
				ae.String(linux.VDPA_ATTR_MGMTDEV_BUS_NAME, "pci")
				ae.String(linux.VDPA_ATTR_MGMTDEV_DEV_NAME, "0000:65:00.2")
				ae.Uint64(linux.VDPA_ATTR_MGMTDEV_SUPPORTED_CLASSES, 1<<1)
				ae.Uint32(linux.VDPA_ATTR_DEV_MGMTDEV_MAX_VQS, 16)
				ae.Uint64(linux.VDPA_ATTR_DEV_SUPPORTED_FEATURES, uint64(virtio.Version1|virtio.NetGuestUSO4))
			}),
		}, nil
	case linux.VDPA_CMD_DEV_NEW:
		if _, ok := f.last[linux.VDPA_ATTR_DEV_NET_CFG_MTU]; ok {
			return nil, genltest.Error(int(unix.EOPNOTSUPP))
		}
		f.devs[name] = true
		return []genetlink.Message{{}}, nil // the ack
	case linux.VDPA_CMD_DEV_DEL:
		if !f.devs[name] {
			return nil, genltest.Error(int(unix.ENODEV))
		}
		delete(f.devs, name)
		return []genetlink.Message{{}}, nil
	case linux.VDPA_CMD_DEV_GET:
		if nreq.Header.Flags&netlink.Dump != 0 {
			var out []genetlink.Message
			for n := range f.devs {
				out = append(out, dev(n))
			}
			return out, nil
		}
		if !f.devs[name] {
			return nil, genltest.Error(int(unix.ENODEV))
		}
		return []genetlink.Message{dev(name)}, nil
	case linux.VDPA_CMD_DEV_CONFIG_GET:
		return []genetlink.Message{enc(func(ae *netlink.AttributeEncoder) {
			ae.String(linux.VDPA_ATTR_DEV_NAME, name)
			ae.Uint32(linux.VDPA_ATTR_DEV_ID, 1)
			ae.Bytes(linux.VDPA_ATTR_DEV_NET_CFG_MACADDR, []byte{2, 0, 0, 0, 0x0d, 1})
			ae.Uint16(linux.VDPA_ATTR_DEV_NET_STATUS, 1) // u16, although documented u8
			ae.Uint16(linux.VDPA_ATTR_DEV_NET_CFG_MTU, 1500)
			ae.Uint64(linux.VDPA_ATTR_DEV_FEATURES, uint64(virtio.Version1|virtio.AccessPlatform))
			ae.Uint64(linux.VDPA_ATTR_DEV_NEGOTIATED_FEATURES, uint64(virtio.Version1|virtio.NetGuestUSO4))
		})}, nil
	case linux.VDPA_CMD_DEV_VSTATS_GET:
		return []genetlink.Message{enc(func(ae *netlink.AttributeEncoder) {
			ae.String(linux.VDPA_ATTR_DEV_NAME, name)
			ae.Uint32(linux.VDPA_ATTR_DEV_ID, 1)
			ae.String(linux.VDPA_ATTR_DEV_VENDOR_ATTR_NAME, "received_desc")
			ae.Uint64(linux.VDPA_ATTR_DEV_VENDOR_ATTR_VALUE, 42)
			ae.String(linux.VDPA_ATTR_DEV_VENDOR_ATTR_NAME, "completed_desc")
			ae.Uint64(linux.VDPA_ATTR_DEV_VENDOR_ATTR_VALUE, 41)
		})}, nil
	}
	return nil, genltest.Error(int(unix.EOPNOTSUPP))
}

// replyCmd is the command of the kernel's reply to each request.
var replyCmd = map[uint8]uint8{
	linux.VDPA_CMD_MGMTDEV_GET:    linux.VDPA_CMD_MGMTDEV_NEW,
	linux.VDPA_CMD_DEV_GET:        linux.VDPA_CMD_DEV_NEW,
	linux.VDPA_CMD_DEV_CONFIG_GET: linux.VDPA_CMD_DEV_CONFIG_GET,
	linux.VDPA_CMD_DEV_VSTATS_GET: linux.VDPA_CMD_DEV_VSTATS_GET,
}

// dialFake serves fn as the vdpa family; DeleteDevice's second socket is
// served by the same fn.
func dialFake(t *testing.T, fn genltest.Func) *Client {
	t.Helper()
	fam := genetlink.Family{ID: 0x30, Name: linux.VDPA_GENL_NAME, Version: linux.VDPA_GENL_VERSION}
	dial := func() (*genetlink.Conn, error) { return genltest.Dial(genltest.ServeFamily(fam, fn)), nil }
	conn, _ := dial()
	c, err := newClient(context.Background(), conn, dial)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func newFake(t *testing.T) (*Client, *fakeFamily) {
	f := &fakeFamily{t: t, devs: map[string]bool{}}
	return dialFake(t, f.serve), f
}

var bg = context.Background()

func TestMgmtDevsDecode(t *testing.T) {
	c, _ := newFake(t)
	mds, err := c.MgmtDevs(bg)
	if err != nil {
		t.Fatal(err)
	}
	want := []MgmtDev{
		{Name: "vduse", Classes: []string{"net", "block"}},
		{BusName: "pci", Name: "0000:65:00.2", Classes: []string{"net"}, MaxVQs: 16, DevFeatures: virtio.Version1 | virtio.NetGuestUSO4,
			HasMaxVQs: true, HasDevFeatures: true},
	}
	if !reflect.DeepEqual(mds, want) {
		t.Errorf("got %+v\nwant %+v", mds, want)
	}
	if mds[1].Handle() != "pci/0000:65:00.2" || mds[0].Handle() != "vduse" {
		t.Errorf("handles %q %q", mds[0].Handle(), mds[1].Handle())
	}
}

func TestDeviceAddShowDelete(t *testing.T) {
	c, f := newFake(t)
	if err := c.AddDevice(bg, AddOptions{Name: "v0", MgmtDev: "pci/0000:65:00.2", MaxVQP: 4, MAC: []byte{2, 0, 0, 0, 0, 9}}); err != nil {
		t.Fatal(err)
	}
	if got := string(f.last[linux.VDPA_ATTR_MGMTDEV_BUS_NAME]); got != "pci\x00" {
		t.Errorf("bus name attribute %q", got)
	}
	if got := string(f.last[linux.VDPA_ATTR_MGMTDEV_DEV_NAME]); got != "0000:65:00.2\x00" {
		t.Errorf("mgmtdev attribute %q", got)
	}
	if got := f.last[linux.VDPA_ATTR_DEV_NET_CFG_MAX_VQP]; len(got) != 2 || got[0] != 4 {
		t.Errorf("max_vqp attribute % x", got)
	}
	if err := c.AddDevice(bg, AddOptions{Name: "v1", MgmtDev: "vduse", MTU: 9000}); err == nil || !strings.Contains(err.Error(), "takes no mac, mtu") {
		t.Errorf("mtu on vduse: %v", err)
	}
	if err := c.AddDevice(bg, AddOptions{Name: "v1"}); err == nil {
		t.Error("add without a management device")
	}
	d, err := c.Device(bg, "v0")
	if err != nil {
		t.Fatal(err)
	}
	if d.Type() != "network" || d.MaxVQs != 2 || d.MaxVQSize != 256 || d.MinVQSize != 1 || d.MgmtDev != "vduse" {
		t.Errorf("device %+v", d)
	}
	if _, err := c.Device(bg, "nope"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing device: %v", err)
	}
	if err := c.DeleteDevice(bg, "v0"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteDevice(bg, "v0"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("second delete: %v", err)
	}
}

func TestConfigAndVStatsDecode(t *testing.T) {
	c, _ := newFake(t)
	cfg, err := c.Config(bg, "v0")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MAC.String() != "02:00:00:00:0d:01" || !cfg.LinkUp || cfg.Announce || cfg.MTU != 1500 ||
		!cfg.HasNegotiated || cfg.Negotiated != virtio.Version1|virtio.NetGuestUSO4 {
		t.Errorf("config %+v", cfg)
	}
	if got := FeatureNames(cfg.Negotiated); !reflect.DeepEqual(got, []string{"VERSION_1", "GUEST_USO4"}) {
		t.Errorf("feature names %v", got)
	}
	_, stats, err := c.VStats(bg, "v0", 1)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(stats, []VendorStat{{"received_desc", 42}, {"completed_desc", 41}}) {
		t.Errorf("stats %+v", stats)
	}
}

func TestFeatureNamesLikeIproute2(t *testing.T) {
	f := virtio.IndirectDesc | virtio.EventIdx | virtio.Version1 | virtio.NetMrgRxbuf | virtio.NetHostUSO | virtio.Bit(58)
	want := []string{"MRG_RXBUF", "RING_INDIRECT_DESC", "RING_EVENT_IDX", "VERSION_1", "HOST_USO", "bit_58"}
	if got := FeatureNames(f); !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestNoFamilyError(t *testing.T) {
	// What the kernel answers when no family has that name.
	_, err := newClient(bg, genltest.Dial(func(genetlink.Message, netlink.Message) ([]genetlink.Message, error) {
		return nil, genltest.Error(int(unix.ENOENT))
	}), nil)
	if !errors.Is(err, ErrNoVDPA) || !errors.Is(err, ErrNotAvailable) {
		t.Errorf("got %v, want ErrNoVDPA (ErrNotAvailable)", err)
	}
}
