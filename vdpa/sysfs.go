package vdpa

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// SysfsDevices is where the vdpa bus lists its devices.
const SysfsDevices = "/sys/bus/vdpa/devices"

// sysfsDrivers is where the vdpa bus lists its drivers.
const sysfsDrivers = "/sys/bus/vdpa/drivers"

// Bus drivers a vdpa device can be bound to.
const (
	DriverVhostVDPA  = "vhost_vdpa"  // gives /dev/vhost-vdpa-N, for a VMM
	DriverVirtioVDPA = "virtio_vdpa" // gives a kernel virtio-net netdev
)

// BoundDriver returns the bus driver the device is bound to, or "".
func BoundDriver(name string) (string, error) {
	if err := checkName("device name", name, true); err != nil {
		return "", fmt.Errorf("vdpa: %w", err)
	}
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
	if err := checkName("device name", name, true); err != nil {
		return "", fmt.Errorf("vdpa: %w", err)
	}
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
// driver_override, unbinding it from its current driver first (like
// `echo NAME > .../unbind; echo DRIVER > .../driver_override; echo NAME >
// .../drivers/DRIVER/bind`). When a step fails, Bind puts back the
// previous driver_override and the previous driver, and the error says
// whether that worked.
func Bind(name, driver string) error {
	return bindWith(name, driver, writeSysfs)
}

func writeSysfs(path string, b []byte) error { return os.WriteFile(path, b, 0) }

// readOverride returns the device's driver_override, "" when unset (sysfs
// shows "(null)").
func readOverride(dev string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dev, "driver_override"))
	if err != nil {
		return "", err
	}
	s := strings.TrimSpace(string(b))
	if s == "(null)" {
		s = ""
	}
	return s, nil
}

// bindWith is Bind with the sysfs writes going through write (a test
// injects failures there).
func bindWith(name, driver string, write func(string, []byte) error) error {
	if err := checkName("device name", name, true); err != nil {
		return fmt.Errorf("vdpa: bind: %w", err)
	}
	if err := checkName("driver name", driver, true); err != nil {
		return fmt.Errorf("vdpa: bind %s: %w", name, err)
	}
	dev := filepath.Join(SysfsDevices, name)
	if _, err := os.Stat(dev); err != nil {
		return fmt.Errorf("vdpa: no device %q on the vdpa bus: %w", name, err)
	}
	if _, err := os.Stat(filepath.Join(sysfsDrivers, driver)); err != nil {
		return fmt.Errorf("vdpa: driver %s is not loaded (modprobe %s; loaded: %s): %w", driver, driver, loadedDrivers(), err)
	}
	cur, err := BoundDriver(name)
	if err != nil {
		return err
	}
	if cur == driver {
		return nil
	}
	prevOverride, err := readOverride(dev)
	if err != nil {
		return fmt.Errorf("vdpa: driver_override of %s: %w", name, err)
	}
	// undo puts back what the failed steps changed, in reverse.
	undo := func(overrideSet bool, cause error) error {
		var errs []error
		if overrideSet {
			if err := write(filepath.Join(dev, "driver_override"), []byte(prevOverride+"\n")); err != nil {
				errs = append(errs, fmt.Errorf("restore driver_override %q: %w", prevOverride, err))
			}
		}
		if now, _ := BoundDriver(name); cur != "" && now != cur {
			if now != "" {
				write(filepath.Join(sysfsDrivers, now, "unbind"), []byte(name))
			}
			if err := write(filepath.Join(sysfsDrivers, cur, "bind"), []byte(name)); err != nil {
				errs = append(errs, fmt.Errorf("rebind to %s: %w", cur, err))
			}
		}
		if len(errs) > 0 {
			return fmt.Errorf("%w; undoing it failed too, the device is left unbound: %w", cause, errors.Join(errs...))
		}
		if cur != "" {
			return fmt.Errorf("%w; it is bound to %s again", cause, cur)
		}
		return cause
	}
	if cur != "" {
		if err := write(filepath.Join(sysfsDrivers, cur, "unbind"), []byte(name)); err != nil {
			return fmt.Errorf("vdpa: unbind %s from %s: %w", name, cur, err)
		}
	}
	if err := write(filepath.Join(dev, "driver_override"), []byte(driver)); err != nil {
		return undo(false, fmt.Errorf("vdpa: driver_override of %s: %w", name, err))
	}
	if err := write(filepath.Join(sysfsDrivers, driver, "bind"), []byte(name)); err != nil {
		return undo(true, fmt.Errorf("vdpa: bind %s to %s: %w", name, driver, err))
	}
	return nil
}

func loadedDrivers() string {
	es, _ := os.ReadDir(sysfsDrivers)
	var ns []string
	for _, e := range es {
		ns = append(ns, e.Name())
	}
	if len(ns) == 0 {
		return "none"
	}
	return strings.Join(ns, ", ")
}

// DeviceOfVhost returns the vdpa device behind a vhost-vdpa char device,
// found by its device number, so any path to the node works
// ("/dev/vhost-vdpa-0", a copy made with mknod elsewhere; a bare
// "vhost-vdpa-0" means the one in /dev).
func DeviceOfVhost(path string) (string, error) {
	if !strings.Contains(path, "/") {
		path = "/dev/" + path
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return "", fmt.Errorf("vdpa: %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR {
		return "", fmt.Errorf("vdpa: %s is not a char device (is it a vhost-vdpa device?): %w", path, ErrInvalid)
	}
	name, _ := mapModeOfNode(SysfsRoot, st.Rdev)
	if name == "" {
		return "", fmt.Errorf("vdpa: no vdpa device has %s (char device %s; is it a vhost-vdpa device?)", path, devString(st.Rdev))
	}
	return name, nil
}
