package vdpa

import (
	"encoding/hex"
	"reflect"
	"testing"

	"github.com/mdlayher/netlink"

	"github.com/netctl/netctl/internal/linux"
)

// TestVMRealRepliesRoundTrip: the kernel's own replies (mgmtdev, dev,
// config) decode, and encode back to bytes that decode the same. With -v
// it prints each reply's attribute bytes in hex: that is where the fuzz
// seeds in testdata/replies come from.
func TestVMRealRepliesRoundTrip(t *testing.T) {
	c := vdpaClient(t, "vdpa")
	dev, _ := addVDUSE(t, c, "replies0")
	defer func() { c.DeleteDevice(bg, "replies0"); dev.Close() }()
	raw := func(cmd, reply uint8, flags netlink.HeaderFlags, withName bool) [][]byte {
		msgs, err := c.execute(bg, cmd, reply, flags, func(ae *netlink.AttributeEncoder) {
			if withName {
				ae.String(linux.VDPA_ATTR_DEV_NAME, "replies0")
			}
		})
		if err != nil {
			t.Fatalf("command %d: %v", cmd, err)
		}
		var out [][]byte
		for _, m := range msgs {
			t.Logf("reply to command %d: %s", cmd, hex.EncodeToString(m.Data))
			out = append(out, m.Data)
		}
		return out
	}
	for _, b := range raw(linux.VDPA_CMD_MGMTDEV_GET, linux.VDPA_CMD_MGMTDEV_NEW, netlink.Request|netlink.Dump, false) {
		d, err := decodeMgmtDev(b)
		if err != nil {
			t.Fatal(err)
		}
		if d2, err := decodeMgmtDev(mustEncode(encodeMgmtDev(d))); err != nil || !reflect.DeepEqual(d, d2) {
			t.Errorf("mgmtdev round trip: %+v -> %+v, %v", d, d2, err)
		}
	}
	for _, b := range raw(linux.VDPA_CMD_DEV_GET, linux.VDPA_CMD_DEV_NEW, netlink.Request, true) {
		d, err := decodeDevice(b)
		if err != nil || d.Name != "replies0" {
			t.Fatalf("dev: %+v, %v", d, err)
		}
		if d2, err := decodeDevice(mustEncode(encodeDevice(d))); err != nil || !reflect.DeepEqual(d, d2) {
			t.Errorf("dev round trip: %+v -> %+v, %v", d, d2, err)
		}
	}
	for _, b := range raw(linux.VDPA_CMD_DEV_CONFIG_GET, linux.VDPA_CMD_DEV_CONFIG_GET, netlink.Request, true) {
		cfg, err := decodeConfig(b)
		if err != nil || cfg.Name != "replies0" || cfg.MTU != 1500 {
			t.Fatalf("config: %+v, %v", cfg, err)
		}
		if c2, err := decodeConfig(mustEncode(encodeConfig(cfg))); err != nil || !reflect.DeepEqual(cfg, c2) {
			t.Errorf("config round trip: %+v -> %+v, %v", cfg, c2, err)
		}
	}
}
