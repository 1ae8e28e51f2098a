package vdpa

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/virtio"
)

// Ranges of the config attributes of a new net device.
const (
	// MinMTU and MaxMTU: the family's policy for DEV_NET_CFG_MTU is
	// NLA_POLICY_MIN(NLA_U16, 68) (drivers/vdpa/vdpa.c).
	MinMTU = 68
	MaxMTU = 65535
	// MaxVQPairs is the virtio spec's VIRTIO_NET_CTRL_MQ_VQ_PAIRS_MAX
	// (0x8000); the kernel refuses 0 ("At least one pair of VQs is
	// required") and takes any other u16, which no device can honour.
	MaxVQPairs = 0x8000
)

// AddOptions describe a new device (vdpa dev add name NAME mgmtdev MGMT
// [mac MAC] [mtu MTU] [max_vqp N] [device_features F]). Zero values of
// MTU, MaxVQP and Features, and a nil MAC, leave them to the management
// device.
type AddOptions struct {
	Name     string
	MgmtDev  string // "name" or "bus/name"
	MAC      net.HardwareAddr
	MTU      uint16          // 0 or MinMTU..MaxMTU
	MaxVQP   uint16          // 0 or 1..MaxVQPairs
	Features virtio.Features // provisioned device features; 0: the management device's
}

// Validate checks the options against the ranges the kernel and the
// virtio spec allow; the error wraps ErrInvalid and names the range.
func (o AddOptions) Validate() error {
	if o.Name == "" || o.MgmtDev == "" {
		return fmt.Errorf("vdpa: dev add needs a name and a management device: %w", ErrInvalid)
	}
	if err := checkName("device name", o.Name, true); err != nil {
		return fmt.Errorf("vdpa: dev add: %w", err)
	}
	bus, mgmt := splitHandle(o.MgmtDev)
	if mgmt == "" || strings.IndexByte(o.MgmtDev, 0) >= 0 || (bus == "" && strings.HasPrefix(o.MgmtDev, "/")) {
		return fmt.Errorf("vdpa: dev add %s: management device %q: give NAME or BUS/NAME: %w", o.Name, o.MgmtDev, ErrInvalid)
	}
	if o.MAC != nil && len(o.MAC) != 6 {
		return fmt.Errorf("vdpa: dev add %s: mac %s: want a 6-byte Ethernet address: %w", o.Name, o.MAC, ErrInvalid)
	}
	if o.MTU != 0 && o.MTU < MinMTU {
		return fmt.Errorf("vdpa: dev add %s: mtu %d out of range %d..%d: %w", o.Name, o.MTU, MinMTU, MaxMTU, ErrInvalid)
	}
	if o.MaxVQP > MaxVQPairs {
		return fmt.Errorf("vdpa: dev add %s: max_vqp %d out of range 1..%d: %w", o.Name, o.MaxVQP, MaxVQPairs, ErrInvalid)
	}
	return nil
}

// AddDevice creates a device (like `vdpa dev add`; needs CAP_NET_ADMIN).
// A management device that takes no config attributes (VDUSE takes none)
// refuses MAC, MTU, MaxVQP and Features; the error says so and wraps
// ErrNotSupported.
func (c *Client) AddDevice(ctx context.Context, o AddOptions) error {
	if err := o.Validate(); err != nil {
		return err
	}
	bus, mgmt := splitHandle(o.MgmtDev)
	_, err := c.execute(ctx, linux.VDPA_CMD_DEV_NEW, 0, netlink.Request|netlink.Acknowledge, func(ae *netlink.AttributeEncoder) {
		ae.String(linux.VDPA_ATTR_DEV_NAME, o.Name)
		if bus != "" {
			ae.String(linux.VDPA_ATTR_MGMTDEV_BUS_NAME, bus)
		}
		ae.String(linux.VDPA_ATTR_MGMTDEV_DEV_NAME, mgmt)
		if o.MAC != nil {
			ae.Bytes(linux.VDPA_ATTR_DEV_NET_CFG_MACADDR, o.MAC)
		}
		if o.MTU != 0 {
			ae.Uint16(linux.VDPA_ATTR_DEV_NET_CFG_MTU, o.MTU)
		}
		if o.MaxVQP != 0 {
			ae.Uint16(linux.VDPA_ATTR_DEV_NET_CFG_MAX_VQP, o.MaxVQP)
		}
		if o.Features != 0 {
			ae.Uint64(linux.VDPA_ATTR_DEV_FEATURES, uint64(o.Features))
		}
	})
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, unix.EPERM):
		return fmt.Errorf("vdpa: dev add %s: needs CAP_NET_ADMIN: run as root: %w", o.Name, err)
	case errors.Is(err, unix.EOPNOTSUPP) && (o.MAC != nil || o.MTU != 0 || o.MaxVQP != 0 || o.Features != 0):
		return fmt.Errorf("vdpa: dev add %s: management device %s takes no mac, mtu, max_vqp or device_features "+
			"(VDUSE devices get them from VDUSE_CREATE_DEV): %w (%w)", o.Name, o.MgmtDev, ErrNotSupported, err)
	case errors.Is(err, unix.ENODEV):
		return fmt.Errorf("vdpa: dev add %s: no management device %q (vdpa mgmtdev show lists them): %w", o.Name, o.MgmtDev, err)
	case errors.Is(err, unix.EEXIST):
		return fmt.Errorf("vdpa: dev add %s: a device of that name exists: %w", o.Name, err)
	}
	return fmt.Errorf("vdpa: dev add %s mgmtdev %s: %w", o.Name, o.MgmtDev, err)
}

// DeleteDevice removes a device (like `vdpa dev del NAME`; needs
// CAP_NET_ADMIN). While a process holds the device's vhost-vdpa node open
// the kernel's delete waits, without a timeout, until it is closed: so
// DeleteDevice first refuses with ErrBusy, naming the processes (see
// Holders), and then sends the delete on a socket of its own and waits for
// it only until ctx ends. If ctx ends first the error wraps ErrBusy and
// ctx's error; the kernel still deletes the device once the last fd is
// closed, and the Client stays usable.
func (c *Client) DeleteDevice(ctx context.Context, name string) error {
	if err := checkName("device name", name, true); err != nil {
		return fmt.Errorf("vdpa: dev del: %w", err)
	}
	hs, herr := Holders(name)
	if len(hs) > 0 {
		var who []string
		for _, h := range hs {
			who = append(who, h.String())
		}
		return fmt.Errorf("vdpa: dev del %s: %s is open in %s; the kernel would wait until it is closed: stop the VM "+
			"(or close the fd) first: %w", name, hs[0].Path, strings.Join(who, ", "), ErrBusy)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("vdpa: dev del %s: %w", name, err)
	}
	c.mu.Lock()
	closed, fam := c.c == nil, c.fam
	c.mu.Unlock()
	if closed {
		return fmt.Errorf("vdpa: dev del %s: netlink client: %w", name, ErrClosed)
	}
	conn, err := c.dial() // on this goroutine's thread: the caller's network namespace
	if err != nil {
		return fmt.Errorf("vdpa: dev del %s: generic netlink: %w", name, err)
	}
	req, err := c.request(linux.VDPA_CMD_DEV_DEL, func(ae *netlink.AttributeEncoder) {
		ae.String(linux.VDPA_ATTR_DEV_NAME, name)
	})
	if err != nil {
		conn.Close()
		return err
	}
	done := make(chan error, 1)
	go func() {
		defer conn.Close()
		_, err := conn.Execute(req, fam.ID, netlink.Request|netlink.Acknowledge)
		done <- wrapErr(err)
	}()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("vdpa: dev del %s: %w", name, notExist(err))
		}
		return nil
	case <-ctx.Done():
		why := "a vhost-vdpa fd of it is open"
		if herr != nil {
			why += " (possibly in a process not listed: " + herr.Error() + ")"
		}
		return fmt.Errorf("vdpa: dev del %s: the kernel has not finished deleting it: %s; it goes once that fd "+
			"is closed: %w (%w)", name, why, ErrBusy, ctx.Err())
	}
}
