package vdpa

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/genetlink/genltest"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
)

// attr is one raw netlink attribute, encoded by hand so that its length
// and type can be wrong.
func attr(typ uint16, payload []byte) []byte {
	b := make([]byte, 4, 4+len(payload)+3)
	binary.NativeEndian.PutUint16(b[0:], uint16(4+len(payload)))
	binary.NativeEndian.PutUint16(b[2:], typ)
	b = append(b, payload...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func cat(bs ...[]byte) []byte {
	var out []byte
	for _, b := range bs {
		out = append(out, b...)
	}
	return out
}

func u32(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }
func u64(v uint64) []byte { return binary.NativeEndian.AppendUint64(nil, v) }
func str(s string) []byte { return append([]byte(s), 0) }

// TestMalformedReplies: a fake family that answers with truncated,
// oversized, wrong-typed and out-of-order attributes, the wrong command
// or the wrong number of replies. Every call returns an error wrapping
// ErrInvalid; none panics.
func TestMalformedReplies(t *testing.T) {
	name := attr(linux.VDPA_ATTR_DEV_NAME, str("v0"))
	good := map[uint8][]byte{
		linux.VDPA_CMD_MGMTDEV_GET:    attr(linux.VDPA_ATTR_MGMTDEV_DEV_NAME, str("vduse")),
		linux.VDPA_CMD_DEV_GET:        name,
		linux.VDPA_CMD_DEV_CONFIG_GET: name,
		linux.VDPA_CMD_DEV_VSTATS_GET: name,
	}
	truncated := attr(linux.VDPA_ATTR_DEV_NAME, str("v0"))
	binary.NativeEndian.PutUint16(truncated, 200) // says 200 bytes, has 8
	cases := []struct {
		what string
		cmd  uint8 // the request it answers; 0: every request
		data []byte
		n    int   // number of replies (default 1)
		rcmd uint8 // reply command (default: the right one)
		// anyErr: the netlink library itself refuses it (any error will do)
		anyErr bool
	}{
		{what: "truncated attribute", data: truncated},
		{what: "attribute header cut", data: cat(name, []byte{8, 0})},
		{what: "oversized u32", cmd: linux.VDPA_CMD_DEV_GET, data: cat(name, attr(linux.VDPA_ATTR_DEV_ID, u64(1)))},
		{what: "short u16", cmd: linux.VDPA_CMD_DEV_GET, data: cat(name, attr(linux.VDPA_ATTR_DEV_MAX_VQ_SIZE, []byte{1}))},
		{what: "u64 as u32", cmd: linux.VDPA_CMD_MGMTDEV_GET, data: cat(good[linux.VDPA_CMD_MGMTDEV_GET], attr(linux.VDPA_ATTR_MGMTDEV_SUPPORTED_CLASSES, u32(2)))},
		{what: "features as string", cmd: linux.VDPA_CMD_DEV_CONFIG_GET, data: cat(name, attr(linux.VDPA_ATTR_DEV_NEGOTIATED_FEATURES, str("VERSION_1")))},
		{what: "7-byte MAC", cmd: linux.VDPA_CMD_DEV_CONFIG_GET, data: cat(name, attr(linux.VDPA_ATTR_DEV_NET_CFG_MACADDR, []byte{1, 2, 3, 4, 5, 6, 7}))},
		{what: "u32 status", cmd: linux.VDPA_CMD_DEV_CONFIG_GET, data: cat(name, attr(linux.VDPA_ATTR_DEV_NET_STATUS, u32(1)))},
		{what: "name missing", data: attr(linux.VDPA_ATTR_DEV_ID, u32(1))},
		{what: "name with a slash", data: cat(attr(linux.VDPA_ATTR_DEV_NAME, str("../x")), attr(linux.VDPA_ATTR_MGMTDEV_DEV_NAME, str("../x")))},
		{what: "oversized name", data: cat(attr(linux.VDPA_ATTR_DEV_NAME, str(strings.Repeat("n", 4000))), attr(linux.VDPA_ATTR_MGMTDEV_DEV_NAME, str(strings.Repeat("n", 4000))))},
		{what: "vstats value before name", cmd: linux.VDPA_CMD_DEV_VSTATS_GET, data: cat(name, attr(linux.VDPA_ATTR_DEV_VENDOR_ATTR_VALUE, u64(1)), attr(linux.VDPA_ATTR_DEV_VENDOR_ATTR_NAME, str("x")))},
		{what: "vstats name without value", cmd: linux.VDPA_CMD_DEV_VSTATS_GET, data: cat(name, attr(linux.VDPA_ATTR_DEV_VENDOR_ATTR_NAME, str("x")))},
		{what: "vstats two names", cmd: linux.VDPA_CMD_DEV_VSTATS_GET, data: cat(name, attr(linux.VDPA_ATTR_DEV_VENDOR_ATTR_NAME, str("x")), attr(linux.VDPA_ATTR_DEV_VENDOR_ATTR_NAME, str("y")), attr(linux.VDPA_ATTR_DEV_VENDOR_ATTR_VALUE, u64(1)))},
		{what: "vstats value u32", cmd: linux.VDPA_CMD_DEV_VSTATS_GET, data: cat(name, attr(linux.VDPA_ATTR_DEV_VENDOR_ATTR_NAME, str("x")), attr(linux.VDPA_ATTR_DEV_VENDOR_ATTR_VALUE, u32(1)))},
		{what: "wrong reply command", rcmd: linux.VDPA_CMD_DEV_DEL},
		{what: "two replies to a doit", cmd: linux.VDPA_CMD_DEV_GET, n: 2},
		{what: "no reply to a doit", cmd: linux.VDPA_CMD_DEV_CONFIG_GET, n: -1, anyErr: true},
		{what: "reply for another device", cmd: linux.VDPA_CMD_DEV_GET, data: attr(linux.VDPA_ATTR_DEV_NAME, str("v1"))},
	}
	for _, tc := range cases {
		serve := func(greq genetlink.Message, _ netlink.Message) ([]genetlink.Message, error) {
			cmd := greq.Header.Command
			data, rcmd := good[cmd], replyCmd[cmd]
			if tc.cmd == 0 || tc.cmd == cmd {
				if tc.data != nil {
					data = tc.data
				}
				if tc.rcmd != 0 {
					rcmd = tc.rcmd
				}
			}
			n := 1
			if tc.cmd == cmd && tc.n != 0 {
				n = max(tc.n, 0)
			}
			var out []genetlink.Message
			for range n {
				out = append(out, genetlink.Message{Header: genetlink.Header{Command: rcmd, Version: 1}, Data: data})
			}
			return out, nil
		}
		c := dialFake(t, serve)
		calls := map[uint8]func() error{
			linux.VDPA_CMD_MGMTDEV_GET: func() error { _, err := c.MgmtDevs(bg); return err },
			linux.VDPA_CMD_DEV_GET: func() error {
				_, err1 := c.Devices(bg)
				_, err2 := c.Device(bg, "v0")
				if tc.cmd == linux.VDPA_CMD_DEV_GET && (tc.n != 0 || strings.Contains(tc.what, "another")) {
					return err2 // a dump may have any number of replies, for any device
				}
				return errors.Join(errOrMissing(err1, "Devices"), errOrMissing(err2, "Device"))
			},
			linux.VDPA_CMD_DEV_CONFIG_GET: func() error {
				_, err1 := c.Configs(bg)
				_, err2 := c.Config(bg, "v0")
				if tc.cmd == linux.VDPA_CMD_DEV_CONFIG_GET && tc.n != 0 {
					return err2
				}
				return errors.Join(errOrMissing(err1, "Configs"), errOrMissing(err2, "Config"))
			},
			linux.VDPA_CMD_DEV_VSTATS_GET: func() error { _, _, err := c.VStats(bg, "v0", 0); return err },
		}
		for cmd, call := range calls {
			if tc.cmd != 0 && tc.cmd != cmd {
				continue
			}
			err := call()
			if tc.anyErr && err != nil {
				continue
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%s, command %d: %v, want an error wrapping ErrInvalid", tc.what, cmd, err)
			}
		}
	}
}

// errOrMissing turns a nil error into a failure, so errors.Join keeps
// one error per call that should have failed.
func errOrMissing(err error, call string) error {
	if err == nil {
		return errors.New(call + " returned no error")
	}
	if !errors.Is(err, ErrInvalid) {
		return err
	}
	return ErrInvalid
}

// TestDeleteDeviceDeadline: the kernel holds DEV_DEL while a vhost-vdpa
// fd is open; DeleteDevice returns at ctx's deadline with ErrBusy and
// the client stays usable meanwhile.
func TestDeleteDeviceDeadline(t *testing.T) {
	release := make(chan struct{})
	serve := func(greq genetlink.Message, _ netlink.Message) ([]genetlink.Message, error) {
		switch greq.Header.Command {
		case linux.VDPA_CMD_DEV_DEL:
			<-release
			return []genetlink.Message{{}}, nil
		case linux.VDPA_CMD_DEV_GET:
			return []genetlink.Message{{Header: genetlink.Header{Command: linux.VDPA_CMD_DEV_NEW}, Data: attr(linux.VDPA_ATTR_DEV_NAME, str("held0"))}}, nil
		}
		return nil, genltest.Error(int(unix.EOPNOTSUPP))
	}
	c := dialFake(t, serve)
	defer close(release)
	ctx, cancel := context.WithTimeout(bg, 200*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	err := c.DeleteDevice(ctx, "held0")
	if el := time.Since(t0); !errors.Is(err, ErrBusy) || !errors.Is(err, context.DeadlineExceeded) || el > 2*time.Second {
		t.Errorf("after %s: %v, want ErrBusy and the deadline", el, err)
	}
	if _, err := c.Device(bg, "held0"); err != nil {
		t.Errorf("the client after a held delete: %v", err)
	}
	// A cancelled context is honoured before anything is sent.
	done, cancel2 := context.WithCancel(bg)
	cancel2()
	if _, err := c.Devices(done); !errors.Is(err, context.Canceled) {
		t.Errorf("Devices with a cancelled context: %v", err)
	}
	c.Close()
	if _, err := c.Devices(bg); !errors.Is(err, ErrClosed) {
		t.Errorf("Devices after Close: %v, want ErrClosed", err)
	}
	if err := c.DeleteDevice(bg, "held0"); !errors.Is(err, ErrClosed) {
		t.Errorf("DeleteDevice after Close: %v, want ErrClosed", err)
	}
}

// TestAddOptionsValidate: values the kernel would truncate or refuse are
// refused before anything is sent, naming the range.
func TestAddOptionsValidate(t *testing.T) {
	c, f := newFake(t)
	for _, tc := range []struct {
		o    AddOptions
		want string
	}{
		{AddOptions{Name: "v", MgmtDev: "vduse", MTU: 67}, "68..65535"},
		{AddOptions{Name: "v", MgmtDev: "vduse", MaxVQP: 0x8001}, "1..32768"},
		{AddOptions{Name: "v", MgmtDev: "vduse", MAC: []byte{1, 2, 3}}, "6-byte"},
		{AddOptions{Name: "a/b", MgmtDev: "vduse"}, "'/'"},
		{AddOptions{Name: "v", MgmtDev: "pci/"}, "BUS/NAME"},
		{AddOptions{Name: "v"}, "needs a name and a management device"},
	} {
		f.last = nil
		err := c.AddDevice(bg, tc.o)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want ErrInvalid naming %q", tc.o, err, tc.want)
		}
		if f.last != nil {
			t.Errorf("%+v: a request reached the kernel", tc.o)
		}
	}
	if err := (AddOptions{Name: "v", MgmtDev: "pci/0000:65:00.2", MTU: 65535, MaxVQP: 0x8000}).Validate(); err != nil {
		t.Errorf("the largest valid values: %v", err)
	}
	if err := c.AddDevice(bg, AddOptions{Name: "v", MgmtDev: "pci/0000:65:00.2", MaxVQP: 0x8000, MTU: 0}); err != nil {
		t.Errorf("max_vqp 0x8000: %v", err)
	}
}
