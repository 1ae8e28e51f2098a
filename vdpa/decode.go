package vdpa

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/mdlayher/netlink"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/virtio"
)

// The decoders of the family's replies and, for tests and round trips,
// their encoders. A decoder never trusts the kernel's bytes: an attribute
// of the wrong size, a name that no kernel sends, a vendor statistic
// without its name or value, all give an error wrapping ErrInvalid.

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

func classBit(name string) (int, bool) {
	for b, n := range classNames {
		if n == name {
			return b, true
		}
	}
	if s, ok := strings.CutPrefix(name, "class_"); ok {
		if b, err := strconv.Atoi(s); err == nil && b >= 1 && b < 64 {
			return b, true
		}
	}
	return 0, false
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

// VendorStat is one vendor statistic of a queue.
type VendorStat struct {
	Name  string `json:"name"`
	Value uint64 `json:"value"`
}

// maxName bounds the names the decoders accept; the kernel's device names
// are far shorter (sysfs names, at most NAME_MAX).
const maxName = 255

// checkName refuses what no kernel sends as a device or bus name: a
// name too long, or one with a '/' (sysfs names have none) or a NUL.
func checkName(what, s string, required bool) error {
	switch {
	case s == "" && required:
		return fmt.Errorf("%s missing: %w", what, ErrInvalid)
	case len(s) > maxName:
		return fmt.Errorf("%s of %d bytes, at most %d: %w", what, len(s), maxName, ErrInvalid)
	case strings.ContainsAny(s, "/\x00"):
		return fmt.Errorf("%s %q has a '/' or a NUL: %w", what, s, ErrInvalid)
	}
	return nil
}

// attrLen checks an attribute's payload length.
func attrLen(ad *netlink.AttributeDecoder, what string, n ...int) error {
	l := len(ad.Bytes())
	for _, x := range n {
		if l == x {
			return nil
		}
	}
	return fmt.Errorf("attribute %d (%s) of %d bytes, want %v: %w", ad.Type(), what, l, n, ErrInvalid)
}

// decoder wraps an attribute decoder that reports malformed input as
// ErrInvalid.
func decoder(data []byte) (*netlink.AttributeDecoder, error) {
	ad, err := netlink.NewAttributeDecoder(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return ad, nil
}

func decodeErr(ad *netlink.AttributeDecoder, err error) error {
	if err != nil {
		return err
	}
	if err := ad.Err(); err != nil {
		return fmt.Errorf("malformed attributes: %w: %w", ErrInvalid, err)
	}
	return nil
}

func decodeMgmtDev(data []byte) (MgmtDev, error) {
	var d MgmtDev
	ad, err := decoder(data)
	if err != nil {
		return d, err
	}
	for err == nil && ad.Next() {
		switch ad.Type() {
		case linux.VDPA_ATTR_MGMTDEV_BUS_NAME:
			d.BusName = ad.String()
			err = checkName("bus name", d.BusName, false)
		case linux.VDPA_ATTR_MGMTDEV_DEV_NAME:
			d.Name = ad.String()
			err = checkName("management device name", d.Name, true)
		case linux.VDPA_ATTR_MGMTDEV_SUPPORTED_CLASSES:
			if err = attrLen(ad, "u64", 8); err != nil {
				break
			}
			classes := ad.Uint64()
			d.Classes = nil
			for i := 1; i < 64; i++ {
				if classes&(1<<i) != 0 {
					n, ok := classNames[i]
					if !ok {
						n = "class_" + strconv.Itoa(i)
					}
					d.Classes = append(d.Classes, n)
				}
			}
		case linux.VDPA_ATTR_DEV_MGMTDEV_MAX_VQS:
			if err = attrLen(ad, "u32", 4); err == nil {
				d.MaxVQs, d.HasMaxVQs = ad.Uint32(), true
			}
		case linux.VDPA_ATTR_DEV_SUPPORTED_FEATURES:
			if err = attrLen(ad, "u64", 8); err == nil {
				d.DevFeatures, d.HasDevFeatures = virtio.Features(ad.Uint64()), true
			}
		}
	}
	if err = decodeErr(ad, err); err == nil {
		err = checkName("management device name", d.Name, true)
	}
	if err != nil {
		return MgmtDev{}, fmt.Errorf("decode mgmtdev: %w", err)
	}
	return d, nil
}

func encodeMgmtDev(d MgmtDev) ([]byte, error) {
	ae := netlink.NewAttributeEncoder()
	if d.BusName != "" {
		ae.String(linux.VDPA_ATTR_MGMTDEV_BUS_NAME, d.BusName)
	}
	ae.String(linux.VDPA_ATTR_MGMTDEV_DEV_NAME, d.Name)
	if d.Classes != nil {
		var mask uint64
		for _, c := range d.Classes {
			b, ok := classBit(c)
			if !ok {
				return nil, fmt.Errorf("class %q: %w", c, ErrInvalid)
			}
			mask |= 1 << b
		}
		ae.Uint64(linux.VDPA_ATTR_MGMTDEV_SUPPORTED_CLASSES, mask)
	}
	if d.HasMaxVQs {
		ae.Uint32(linux.VDPA_ATTR_DEV_MGMTDEV_MAX_VQS, d.MaxVQs)
	}
	if d.HasDevFeatures {
		ae.Uint64(linux.VDPA_ATTR_DEV_SUPPORTED_FEATURES, uint64(d.DevFeatures))
	}
	return ae.Encode()
}

func decodeDevice(data []byte) (Device, error) {
	var d Device
	var bus, mgmt string
	ad, err := decoder(data)
	if err != nil {
		return d, err
	}
	for err == nil && ad.Next() {
		switch ad.Type() {
		case linux.VDPA_ATTR_DEV_NAME:
			d.Name = ad.String()
			err = checkName("device name", d.Name, true)
		case linux.VDPA_ATTR_MGMTDEV_BUS_NAME:
			bus = ad.String()
			err = checkName("bus name", bus, false)
		case linux.VDPA_ATTR_MGMTDEV_DEV_NAME:
			mgmt = ad.String()
			err = checkName("management device name", mgmt, false)
		case linux.VDPA_ATTR_DEV_ID:
			if err = attrLen(ad, "u32", 4); err == nil {
				d.DeviceID = ad.Uint32()
			}
		case linux.VDPA_ATTR_DEV_VENDOR_ID:
			if err = attrLen(ad, "u32", 4); err == nil {
				d.VendorID = ad.Uint32()
			}
		case linux.VDPA_ATTR_DEV_MAX_VQS:
			if err = attrLen(ad, "u32", 4); err == nil {
				d.MaxVQs = ad.Uint32()
			}
		case linux.VDPA_ATTR_DEV_MAX_VQ_SIZE:
			if err = attrLen(ad, "u16", 2); err == nil {
				d.MaxVQSize = ad.Uint16()
			}
		case linux.VDPA_ATTR_DEV_MIN_VQ_SIZE:
			if err = attrLen(ad, "u16", 2); err == nil {
				d.MinVQSize = ad.Uint16()
			}
		}
	}
	if err = decodeErr(ad, err); err == nil {
		err = checkName("device name", d.Name, true)
	}
	if err != nil {
		return Device{}, fmt.Errorf("decode dev: %w", err)
	}
	d.MgmtDev = mgmt
	if bus != "" {
		d.MgmtDev = bus + "/" + mgmt
	}
	return d, nil
}

// splitHandle splits "bus/name" (or "name") at its last '/'.
func splitHandle(h string) (bus, name string) {
	if i := strings.LastIndexByte(h, '/'); i >= 0 {
		return h[:i], h[i+1:]
	}
	return "", h
}

func encodeDevice(d Device) ([]byte, error) {
	ae := netlink.NewAttributeEncoder()
	ae.String(linux.VDPA_ATTR_DEV_NAME, d.Name)
	bus, mgmt := splitHandle(d.MgmtDev)
	if bus != "" {
		ae.String(linux.VDPA_ATTR_MGMTDEV_BUS_NAME, bus)
	}
	if mgmt != "" || bus != "" {
		ae.String(linux.VDPA_ATTR_MGMTDEV_DEV_NAME, mgmt)
	}
	ae.Uint32(linux.VDPA_ATTR_DEV_ID, d.DeviceID)
	ae.Uint32(linux.VDPA_ATTR_DEV_VENDOR_ID, d.VendorID)
	ae.Uint32(linux.VDPA_ATTR_DEV_MAX_VQS, d.MaxVQs)
	ae.Uint16(linux.VDPA_ATTR_DEV_MAX_VQ_SIZE, d.MaxVQSize)
	ae.Uint16(linux.VDPA_ATTR_DEV_MIN_VQ_SIZE, d.MinVQSize)
	return ae.Encode()
}

// decodeConfigAttr decodes one attribute of a config (or vstats) reply;
// it ignores attributes that are not part of Config.
func decodeConfigAttr(ad *netlink.AttributeDecoder, c *Config) error {
	switch ad.Type() {
	case linux.VDPA_ATTR_DEV_NAME:
		c.Name = ad.String()
		return checkName("device name", c.Name, true)
	case linux.VDPA_ATTR_DEV_ID:
		if err := attrLen(ad, "u32", 4); err != nil {
			return err
		}
		c.DeviceID = ad.Uint32()
	case linux.VDPA_ATTR_DEV_NET_CFG_MACADDR:
		if err := attrLen(ad, "MAC", 6); err != nil {
			return err
		}
		c.MAC = net.HardwareAddr(ad.Bytes())
	case linux.VDPA_ATTR_DEV_NET_STATUS:
		// documented u8, emitted as u16 (vdpa.c)
		if err := attrLen(ad, "u16", 2, 1); err != nil {
			return err
		}
		b := ad.Bytes()
		st := uint16(b[0])
		if len(b) == 2 {
			st = uint16(ad.Uint16())
		}
		c.HasStatus, c.LinkUp, c.Announce = true, st&linux.VIRTIO_NET_S_LINK_UP != 0, st&linux.VIRTIO_NET_S_ANNOUNCE != 0
	case linux.VDPA_ATTR_DEV_NET_CFG_MAX_VQP:
		if err := attrLen(ad, "u16", 2); err != nil {
			return err
		}
		c.MaxVQP = ad.Uint16()
	case linux.VDPA_ATTR_DEV_NET_CFG_MTU:
		if err := attrLen(ad, "u16", 2); err != nil {
			return err
		}
		c.MTU = ad.Uint16()
	case linux.VDPA_ATTR_DEV_FEATURES:
		if err := attrLen(ad, "u64", 8); err != nil {
			return err
		}
		c.Features = virtio.Features(ad.Uint64())
	case linux.VDPA_ATTR_DEV_NEGOTIATED_FEATURES:
		if err := attrLen(ad, "u64", 8); err != nil {
			return err
		}
		c.Negotiated, c.HasNegotiated = virtio.Features(ad.Uint64()), true
	}
	return nil
}

func decodeConfig(data []byte) (Config, error) {
	var c Config
	ad, err := decoder(data)
	if err != nil {
		return c, err
	}
	for err == nil && ad.Next() {
		err = decodeConfigAttr(ad, &c)
	}
	if err = decodeErr(ad, err); err == nil {
		err = checkName("device name", c.Name, true)
	}
	if err != nil {
		return Config{}, fmt.Errorf("decode config: %w", err)
	}
	return c, nil
}

func encodeConfigAttrs(ae *netlink.AttributeEncoder, c Config) {
	ae.String(linux.VDPA_ATTR_DEV_NAME, c.Name)
	ae.Uint32(linux.VDPA_ATTR_DEV_ID, c.DeviceID)
	if c.HasNegotiated {
		ae.Uint64(linux.VDPA_ATTR_DEV_NEGOTIATED_FEATURES, uint64(c.Negotiated))
	}
	if c.Features != 0 {
		ae.Uint64(linux.VDPA_ATTR_DEV_FEATURES, uint64(c.Features))
	}
	if c.MTU != 0 {
		ae.Uint16(linux.VDPA_ATTR_DEV_NET_CFG_MTU, c.MTU)
	}
	if c.MAC != nil {
		ae.Bytes(linux.VDPA_ATTR_DEV_NET_CFG_MACADDR, c.MAC)
	}
	if c.HasStatus {
		var st uint16
		if c.LinkUp {
			st |= linux.VIRTIO_NET_S_LINK_UP
		}
		if c.Announce {
			st |= linux.VIRTIO_NET_S_ANNOUNCE
		}
		ae.Uint16(linux.VDPA_ATTR_DEV_NET_STATUS, st)
	}
	if c.MaxVQP != 0 {
		ae.Uint16(linux.VDPA_ATTR_DEV_NET_CFG_MAX_VQP, c.MaxVQP)
	}
}

func encodeConfig(c Config) ([]byte, error) {
	ae := netlink.NewAttributeEncoder()
	encodeConfigAttrs(ae, c)
	return ae.Encode()
}

// decodeVStats decodes a vstats reply: the device's config attributes,
// then name/value pairs in order (vdpa.c emits each name right before
// its value).
func decodeVStats(data []byte) (Config, []VendorStat, error) {
	var c Config
	var stats []VendorStat
	ad, err := decoder(data)
	if err != nil {
		return c, nil, err
	}
	var cur *VendorStat
	for err == nil && ad.Next() {
		switch ad.Type() {
		case linux.VDPA_ATTR_DEV_VENDOR_ATTR_NAME:
			if cur != nil {
				err = fmt.Errorf("vendor statistic %q has no value: %w", cur.Name, ErrInvalid)
				break
			}
			cur = &VendorStat{Name: ad.String()}
			if cur.Name == "" || len(cur.Name) > maxName || strings.IndexByte(cur.Name, 0) >= 0 {
				err = fmt.Errorf("vendor statistic name %q: %w", cur.Name, ErrInvalid)
			}
		case linux.VDPA_ATTR_DEV_VENDOR_ATTR_VALUE:
			if cur == nil {
				err = fmt.Errorf("vendor statistic value without a name: %w", ErrInvalid)
				break
			}
			if err = attrLen(ad, "u64", 8); err == nil {
				cur.Value = ad.Uint64()
				stats = append(stats, *cur)
				cur = nil
			}
		default:
			err = decodeConfigAttr(ad, &c)
		}
	}
	if err = decodeErr(ad, err); err == nil && cur != nil {
		err = fmt.Errorf("vendor statistic %q has no value: %w", cur.Name, ErrInvalid)
	}
	if err == nil {
		err = checkName("device name", c.Name, true)
	}
	if err != nil {
		return Config{}, nil, fmt.Errorf("decode vstats: %w", err)
	}
	return c, stats, nil
}

func encodeVStats(c Config, stats []VendorStat) ([]byte, error) {
	ae := netlink.NewAttributeEncoder()
	encodeConfigAttrs(ae, c)
	for _, s := range stats {
		ae.String(linux.VDPA_ATTR_DEV_VENDOR_ATTR_NAME, s.Name)
		ae.Uint64(linux.VDPA_ATTR_DEV_VENDOR_ATTR_VALUE, s.Value)
	}
	return ae.Encode()
}
