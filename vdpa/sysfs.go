package vdpa

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// SysfsDevices is where the vdpa bus lists its devices.
const SysfsDevices = "/sys/bus/vdpa/devices"

// Bus drivers a vdpa device can be bound to.
const (
	DriverVhostVDPA  = "vhost_vdpa"  // gives /dev/vhost-vdpa-N, for a VMM
	DriverVirtioVDPA = "virtio_vdpa" // gives a kernel virtio-net netdev
)

// BoundDriver returns the bus driver the device is bound to, or "".
func BoundDriver(name string) (string, error) {
	link, err := os.Readlink(filepath.Join(SysfsDevices, name, "driver"))
	if errors.Is(err, os.ErrNotExist) {
		if _, serr := os.Stat(filepath.Join(SysfsDevices, name)); serr != nil {
			return "", fmt.Errorf("vdpa: no device %q on the vdpa bus: %w", name, serr)
		}
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("vdpa: %w", err)
	}
	return filepath.Base(link), nil
}

// VhostVDPAPath finds /dev/vhost-vdpa-N for a device bound to vhost_vdpa.
func VhostVDPAPath(name string) (string, error) {
	es, err := os.ReadDir(filepath.Join(SysfsDevices, name))
	if err != nil {
		return "", fmt.Errorf("vdpa: no device %q on the vdpa bus: %w", name, err)
	}
	for _, e := range es {
		if strings.HasPrefix(e.Name(), "vhost-vdpa-") {
			return "/dev/" + e.Name(), nil
		}
	}
	drv, _ := BoundDriver(name)
	if drv == "" {
		drv = "no driver"
	}
	return "", fmt.Errorf("vdpa: %s has no vhost-vdpa char device: it is bound to %s; bind it to vhost_vdpa "+
		"(netctl: vdpa.Bind(%q, vdpa.DriverVhostVDPA); modprobe vhost_vdpa first)", name, drv, name)
}

// Bind binds the device to driver (vhost_vdpa or virtio_vdpa) through
// driver_override, unbinding it from its current driver first.
func Bind(name, driver string) error {
	dev := filepath.Join(SysfsDevices, name)
	if _, err := os.Stat(dev); err != nil {
		return fmt.Errorf("vdpa: no device %q on the vdpa bus: %w", name, err)
	}
	if _, err := os.Stat(filepath.Join("/sys/bus/vdpa/drivers", driver)); err != nil {
		return fmt.Errorf("vdpa: driver %s is not loaded (modprobe %s): %w", driver, driver, err)
	}
	cur, err := BoundDriver(name)
	if err != nil {
		return err
	}
	if cur == driver {
		return nil
	}
	if cur != "" {
		if err := os.WriteFile(filepath.Join("/sys/bus/vdpa/drivers", cur, "unbind"), []byte(name), 0); err != nil {
			return fmt.Errorf("vdpa: unbind %s from %s: %w", name, cur, err)
		}
	}
	if err := os.WriteFile(filepath.Join(dev, "driver_override"), []byte(driver), 0); err != nil {
		return fmt.Errorf("vdpa: driver_override of %s: %w", name, err)
	}
	if err := os.WriteFile(filepath.Join("/sys/bus/vdpa/drivers", driver, "bind"), []byte(name), 0); err != nil {
		return fmt.Errorf("vdpa: bind %s to %s: %w", name, driver, err)
	}
	return nil
}

// DeviceOfVhost returns the vdpa device behind a vhost-vdpa char device
// ("/dev/vhost-vdpa-0" or "vhost-vdpa-0").
func DeviceOfVhost(path string) (string, error) {
	node := filepath.Base(path)
	ms, _ := filepath.Glob(filepath.Join(SysfsDevices, "*", node))
	if len(ms) != 1 {
		return "", fmt.Errorf("vdpa: no vdpa device has %s (is it a vhost-vdpa device?)", node)
	}
	return filepath.Base(filepath.Dir(ms[0])), nil
}
