package vdpa

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/virtio"
)

// ErrNoVDPA is wrapped by Dial's error when this kernel (or this network
// namespace) has no vdpa family.
var ErrNoVDPA = errors.New("no vdpa netlink family")

// ErrBusy: a process holds the device's vhost-vdpa node open.
var ErrBusy = errors.New("device busy")

// Client talks to the vdpa family.
type Client struct {
	c   *genetlink.Conn
	fam genetlink.Family
}

// Dial opens the vdpa family. Outside the initial network namespace, or
// without the vdpa module, the error says so and wraps ErrNoVDPA.
func Dial() (*Client, error) {
	c, err := genetlink.Dial(nil)
	if err != nil {
		return nil, fmt.Errorf("vdpa: generic netlink: %w", err)
	}
	cl, err := newClient(c)
	if err != nil {
		c.Close()
		return nil, err
	}
	return cl, nil
}

func newClient(c *genetlink.Conn) (*Client, error) {
	fam, err := c.GetFamily(linux.VDPA_GENL_NAME)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, noFamilyError(err)
		}
		return nil, fmt.Errorf("vdpa: %w", err)
	}
	return &Client{c: c, fam: fam}, nil
}

func noFamilyError(err error) error {
	if !inInitialNetns() {
		return fmt.Errorf("vdpa: %w: the vdpa family exists only in the initial network namespace; "+
			"run this in the host's namespace (not in a container or 'ip netns exec'): %w", ErrNoVDPA, err)
	}
	if _, serr := os.Stat("/sys/bus/vdpa"); serr != nil {
		return fmt.Errorf("vdpa: %w: this kernel has no vdpa support loaded: modprobe vdpa "+
			"(CONFIG_VDPA, Linux 5.12+; Debian 12's 6.1 kernel has none): %w", ErrNoVDPA, err)
	}
	return fmt.Errorf("vdpa: %w: %w", ErrNoVDPA, err)
}

// inInitialNetns compares this thread's network namespace with init's.
func inInitialNetns() bool {
	var a, b unix.Stat_t
	if unix.Stat("/proc/thread-self/ns/net", &a) != nil || unix.Stat("/proc/1/ns/net", &b) != nil {
		return true // cannot tell: do not claim otherwise
	}
	return a.Ino == b.Ino && a.Dev == b.Dev
}

// Close closes the netlink socket.
func (c *Client) Close() error { return c.c.Close() }

func (c *Client) execute(cmd uint8, flags netlink.HeaderFlags, enc func(*netlink.AttributeEncoder)) ([]genetlink.Message, error) {
	ae := netlink.NewAttributeEncoder()
	if enc != nil {
		enc(ae)
	}
	data, err := ae.Encode()
	if err != nil {
		return nil, err
	}
	msgs, err := c.c.Execute(genetlink.Message{
		Header: genetlink.Header{Command: cmd, Version: linux.VDPA_GENL_VERSION},
		Data:   data,
	}, c.fam.ID, flags)
	return msgs, wrapErr(err)
}

// wrapErr keeps the kernel's extended-ack text and the errno.
func wrapErr(err error) error {
	if err == nil {
		return nil
	}
	var oe *netlink.OpError
	if errors.As(err, &oe) && oe.Message != "" {
		return fmt.Errorf("%s: %w", oe.Message, oe.Err)
	}
	if errors.As(err, &oe) {
		return oe.Err
	}
	return err
}

// MgmtDev is a vDPA management device (vdpa mgmtdev show).
type MgmtDev struct {
	BusName     string          `json:"bus,omitempty"`
	Name        string          `json:"name"`
	Classes     []string        `json:"supported_classes"`
	MaxVQs      uint32          `json:"max_supported_vqs,omitempty"`
	DevFeatures virtio.Features `json:"-"`
	// HasMaxVQs and HasDevFeatures say whether the kernel sent those
	// attributes (it may send them as 0).
	HasMaxVQs, HasDevFeatures bool `json:"-"`
}

// Handle is "bus/name", or the name alone without a bus (as iproute2 prints).
func (m MgmtDev) Handle() string {
	if m.BusName != "" {
		return m.BusName + "/" + m.Name
	}
	return m.Name
}

var classNames = map[int]string{linux.VIRTIO_ID_NET: "net", linux.VIRTIO_ID_BLOCK: "block"}

// MgmtDevs lists the management devices.
func (c *Client) MgmtDevs() ([]MgmtDev, error) {
	msgs, err := c.execute(linux.VDPA_CMD_MGMTDEV_GET, netlink.Request|netlink.Dump, nil)
	if err != nil {
		return nil, fmt.Errorf("vdpa: mgmtdev show: %w", err)
	}
	var out []MgmtDev
	for _, m := range msgs {
		var d MgmtDev
		ad, err := netlink.NewAttributeDecoder(m.Data)
		if err != nil {
			return nil, err
		}
		for ad.Next() {
			switch ad.Type() {
			case linux.VDPA_ATTR_MGMTDEV_BUS_NAME:
				d.BusName = ad.String()
			case linux.VDPA_ATTR_MGMTDEV_DEV_NAME:
				d.Name = ad.String()
			case linux.VDPA_ATTR_MGMTDEV_SUPPORTED_CLASSES:
				classes := ad.Uint64()
				for i := 1; i < 64; i++ {
					if classes&(1<<i) != 0 {
						n, ok := classNames[i]
						if !ok {
							n = fmt.Sprintf("class_%d", i)
						}
						d.Classes = append(d.Classes, n)
					}
				}
			case linux.VDPA_ATTR_DEV_MGMTDEV_MAX_VQS:
				d.MaxVQs, d.HasMaxVQs = ad.Uint32(), true
			case linux.VDPA_ATTR_DEV_SUPPORTED_FEATURES:
				d.DevFeatures, d.HasDevFeatures = virtio.Features(ad.Uint64()), true
			}
		}
		if err := ad.Err(); err != nil {
			return nil, fmt.Errorf("vdpa: decode mgmtdev: %w", err)
		}
		out = append(out, d)
	}
	return out, nil
}

// Device is a vDPA device (vdpa dev show).
type Device struct {
	Name      string `json:"name"`
	MgmtDev   string `json:"mgmtdev"` // handle: bus/name or name
	DeviceID  uint32 `json:"device_id"`
	VendorID  uint32 `json:"vendor_id"`
	MaxVQs    uint32 `json:"max_vqs"`
	MaxVQSize uint16 `json:"max_vq_size"`
	MinVQSize uint16 `json:"min_vq_size,omitempty"`
}

// Type is "network", "block" or "<unknown type>", as iproute2 prints it.
func (d Device) Type() string {
	switch d.DeviceID {
	case linux.VIRTIO_ID_NET:
		return "network"
	case linux.VIRTIO_ID_BLOCK:
		return "block"
	}
	return "<unknown type>"
}

func decodeDevice(data []byte) (Device, error) {
	var d Device
	var bus, mgmt string
	ad, err := netlink.NewAttributeDecoder(data)
	if err != nil {
		return d, err
	}
	for ad.Next() {
		switch ad.Type() {
		case linux.VDPA_ATTR_DEV_NAME:
			d.Name = ad.String()
		case linux.VDPA_ATTR_MGMTDEV_BUS_NAME:
			bus = ad.String()
		case linux.VDPA_ATTR_MGMTDEV_DEV_NAME:
			mgmt = ad.String()
		case linux.VDPA_ATTR_DEV_ID:
			d.DeviceID = ad.Uint32()
		case linux.VDPA_ATTR_DEV_VENDOR_ID:
			d.VendorID = ad.Uint32()
		case linux.VDPA_ATTR_DEV_MAX_VQS:
			d.MaxVQs = ad.Uint32()
		case linux.VDPA_ATTR_DEV_MAX_VQ_SIZE:
			d.MaxVQSize = ad.Uint16()
		case linux.VDPA_ATTR_DEV_MIN_VQ_SIZE:
			d.MinVQSize = ad.Uint16()
		}
	}
	d.MgmtDev = mgmt
	if bus != "" {
		d.MgmtDev = bus + "/" + mgmt
	}
	return d, ad.Err()
}

// Devices lists the vDPA devices.
func (c *Client) Devices() ([]Device, error) {
	msgs, err := c.execute(linux.VDPA_CMD_DEV_GET, netlink.Request|netlink.Dump, nil)
	if err != nil {
		return nil, fmt.Errorf("vdpa: dev show: %w", err)
	}
	var out []Device
	for _, m := range msgs {
		d, err := decodeDevice(m.Data)
		if err != nil {
			return nil, fmt.Errorf("vdpa: decode dev: %w", err)
		}
		out = append(out, d)
	}
	return out, nil
}

// Device returns one device by name; a missing device wraps os.ErrNotExist.
func (c *Client) Device(name string) (Device, error) {
	msgs, err := c.execute(linux.VDPA_CMD_DEV_GET, netlink.Request, func(ae *netlink.AttributeEncoder) {
		ae.String(linux.VDPA_ATTR_DEV_NAME, name)
	})
	if err != nil {
		return Device{}, fmt.Errorf("vdpa: dev show %s: %w", name, notExist(err))
	}
	if len(msgs) != 1 {
		return Device{}, fmt.Errorf("vdpa: dev show %s: %d replies", name, len(msgs))
	}
	return decodeDevice(msgs[0].Data)
}

func notExist(err error) error {
	if errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("%w (%w)", os.ErrNotExist, err)
	}
	return err
}

// AddOptions describe a new device (vdpa dev add name NAME mgmtdev MGMT
// [mac MAC] [mtu MTU] [max_vqp N] [device_features F]).
type AddOptions struct {
	Name     string
	MgmtDev  string // "name" or "bus/name"
	MAC      net.HardwareAddr
	MTU      uint16
	MaxVQP   uint16
	Features virtio.Features // provisioned device features; 0: the management device's
}

// AddDevice creates a device (needs CAP_NET_ADMIN). A management device
// that takes no config attributes (VDUSE takes none) refuses MAC, MTU,
// MaxVQP and Features with EOPNOTSUPP; the error says so.
func (c *Client) AddDevice(o AddOptions) error {
	if o.Name == "" || o.MgmtDev == "" {
		return errors.New("vdpa: dev add needs a name and a management device")
	}
	bus, mgmt := "", o.MgmtDev
	for i := len(o.MgmtDev) - 1; i >= 0; i-- {
		if o.MgmtDev[i] == '/' {
			bus, mgmt = o.MgmtDev[:i], o.MgmtDev[i+1:]
			break
		}
	}
	_, err := c.execute(linux.VDPA_CMD_DEV_NEW, netlink.Request|netlink.Acknowledge, func(ae *netlink.AttributeEncoder) {
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
			"(VDUSE devices get them from VDUSE_CREATE_DEV): %w", o.Name, o.MgmtDev, err)
	case errors.Is(err, unix.ENODEV):
		return fmt.Errorf("vdpa: dev add %s: no management device %q (vdpa mgmtdev show lists them): %w", o.Name, o.MgmtDev, err)
	case errors.Is(err, unix.EEXIST):
		return fmt.Errorf("vdpa: dev add %s: a device of that name exists: %w", o.Name, err)
	}
	return fmt.Errorf("vdpa: dev add %s mgmtdev %s: %w", o.Name, o.MgmtDev, err)
}

// DeleteDevice removes a device (vdpa dev del NAME). It refuses, instead
// of blocking for as long as they keep it, while processes hold the
// device's vhost-vdpa node open (see Holders).
func (c *Client) DeleteDevice(name string) error {
	if hs, err := Holders(name); err == nil && len(hs) > 0 {
		var who []string
		for _, h := range hs {
			who = append(who, h.String())
		}
		return fmt.Errorf("vdpa: dev del %s: %s is open in %s; the kernel would wait until it is closed: stop the VM "+
			"(or close the fd) first: %w", name, hs[0].Path, strings.Join(who, ", "), ErrBusy)
	}
	_, err := c.execute(linux.VDPA_CMD_DEV_DEL, netlink.Request|netlink.Acknowledge, func(ae *netlink.AttributeEncoder) {
		ae.String(linux.VDPA_ATTR_DEV_NAME, name)
	})
	if err != nil {
		return fmt.Errorf("vdpa: dev del %s: %w", name, notExist(err))
	}
	return nil
}

// Config is a device's config space as the family reports it (vdpa dev
// config show).
type Config struct {
	Name          string           `json:"name"`
	DeviceID      uint32           `json:"device_id"`
	MAC           net.HardwareAddr `json:"-"`
	HasStatus     bool             `json:"-"`
	LinkUp        bool             `json:"-"`
	Announce      bool             `json:"-"`
	MaxVQP        uint16           `json:"-"`
	MTU           uint16           `json:"-"`
	Features      virtio.Features  `json:"-"` // the device's features
	Negotiated    virtio.Features  `json:"-"` // once FEATURES_OK is set
	HasNegotiated bool             `json:"-"`
}

func decodeConfig(data []byte) (Config, error) {
	var c Config
	ad, err := netlink.NewAttributeDecoder(data)
	if err != nil {
		return c, err
	}
	for ad.Next() {
		switch ad.Type() {
		case linux.VDPA_ATTR_DEV_NAME:
			c.Name = ad.String()
		case linux.VDPA_ATTR_DEV_ID:
			c.DeviceID = ad.Uint32()
		case linux.VDPA_ATTR_DEV_NET_CFG_MACADDR:
			c.MAC = net.HardwareAddr(ad.Bytes())
		case linux.VDPA_ATTR_DEV_NET_STATUS:
			// documented u8, emitted as u16
			b := ad.Bytes()
			var st uint16
			if len(b) >= 2 {
				st = uint16(b[0]) | uint16(b[1])<<8
			} else if len(b) == 1 {
				st = uint16(b[0])
			}
			c.HasStatus, c.LinkUp, c.Announce = true, st&linux.VIRTIO_NET_S_LINK_UP != 0, st&linux.VIRTIO_NET_S_ANNOUNCE != 0
		case linux.VDPA_ATTR_DEV_NET_CFG_MAX_VQP:
			c.MaxVQP = ad.Uint16()
		case linux.VDPA_ATTR_DEV_NET_CFG_MTU:
			c.MTU = ad.Uint16()
		case linux.VDPA_ATTR_DEV_FEATURES:
			c.Features = virtio.Features(ad.Uint64())
		case linux.VDPA_ATTR_DEV_NEGOTIATED_FEATURES:
			c.Negotiated, c.HasNegotiated = virtio.Features(ad.Uint64()), true
		}
	}
	return c, ad.Err()
}

// Config reads one device's config.
func (c *Client) Config(name string) (Config, error) {
	msgs, err := c.execute(linux.VDPA_CMD_DEV_CONFIG_GET, netlink.Request, func(ae *netlink.AttributeEncoder) {
		ae.String(linux.VDPA_ATTR_DEV_NAME, name)
	})
	if err != nil {
		return Config{}, fmt.Errorf("vdpa: dev config show %s: %w", name, notExist(err))
	}
	if len(msgs) != 1 {
		return Config{}, fmt.Errorf("vdpa: dev config show %s: %d replies", name, len(msgs))
	}
	return decodeConfig(msgs[0].Data)
}

// Configs reads every device's config.
func (c *Client) Configs() ([]Config, error) {
	msgs, err := c.execute(linux.VDPA_CMD_DEV_CONFIG_GET, netlink.Request|netlink.Dump, nil)
	if err != nil {
		return nil, fmt.Errorf("vdpa: dev config show: %w", err)
	}
	var out []Config
	for _, m := range msgs {
		cfg, err := decodeConfig(m.Data)
		if err != nil {
			return nil, err
		}
		out = append(out, cfg)
	}
	return out, nil
}

// VendorStat is one vendor statistic of a queue.
type VendorStat struct {
	Name  string `json:"name"`
	Value uint64 `json:"value"`
}

// VStats reads a queue's vendor statistics (vdpa dev vstats show NAME qidx
// N; CAP_NET_ADMIN). Devices whose driver has none (VDUSE) answer
// EOPNOTSUPP, and before FEATURES_OK the kernel answers EAGAIN.
func (c *Client) VStats(name string, queue uint32) (Config, []VendorStat, error) {
	msgs, err := c.execute(linux.VDPA_CMD_DEV_VSTATS_GET, netlink.Request, func(ae *netlink.AttributeEncoder) {
		ae.String(linux.VDPA_ATTR_DEV_NAME, name)
		ae.Uint32(linux.VDPA_ATTR_DEV_QUEUE_INDEX, queue)
	})
	if err != nil {
		switch {
		case errors.Is(err, unix.EOPNOTSUPP):
			return Config{}, nil, fmt.Errorf("vdpa: vstats %s queue %d: this device's driver has no per-queue statistics: %w", name, queue, err)
		case errors.Is(err, unix.EAGAIN):
			return Config{}, nil, fmt.Errorf("vdpa: vstats %s queue %d: the driver has not negotiated features yet (FEATURES_OK): %w", name, queue, err)
		}
		return Config{}, nil, fmt.Errorf("vdpa: vstats %s queue %d: %w", name, queue, notExist(err))
	}
	if len(msgs) != 1 {
		return Config{}, nil, fmt.Errorf("vdpa: vstats %s: %d replies", name, len(msgs))
	}
	cfg, err := decodeConfig(msgs[0].Data)
	var stats []VendorStat
	ad, derr := netlink.NewAttributeDecoder(msgs[0].Data)
	if derr != nil {
		return cfg, nil, derr
	}
	var cur VendorStat
	for ad.Next() {
		switch ad.Type() {
		case linux.VDPA_ATTR_DEV_VENDOR_ATTR_NAME:
			cur.Name = ad.String()
		case linux.VDPA_ATTR_DEV_VENDOR_ATTR_VALUE:
			cur.Value = ad.Uint64()
			stats = append(stats, cur)
			cur = VendorStat{}
		}
	}
	return cfg, stats, err
}
