package cni

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/netctl/netctl/internal/errs"
)

// DeviceInfo is the NPWG device-info spec's (v1.1.0) document for a vdpa
// device: Multus copies it into the pod's network-status, from which
// KubeVirt's network-info gives it to the binding's sidecar.
type DeviceInfo struct {
	Type    string    `json:"type"`
	Version string    `json:"version"`
	VDPA    *VDPAInfo `json:"vdpa,omitempty"`
}

// VDPAInfo is the spec's vdpa object.
type VDPAInfo struct {
	ParentDevice string `json:"parent-device"`
	Driver       string `json:"driver"`
	Path         string `json:"path"`
}

// writeDeviceInfo writes the device-info file, creating its directory.
// A file already there is ADD's only when it names device dev (left by
// an ADD of this attachment that was killed): it is replaced. Any other
// (someone else's, or stale: the runtime gives a unique path, and the
// pod would be told of that other device) fails ADD as a conflict and is
// left alone.
func writeDeviceInfo(path, dev, vhost string) error {
	b, err := json.Marshal(DeviceInfo{Type: "vdpa", Version: "1.1.0", VDPA: &VDPAInfo{ParentDevice: dev, Driver: "vhost", Path: vhost}})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("device-info %s: %w", path, err)
	}
	target := path
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, os.ErrExist) {
		if !namesDevice(path, dev) {
			return fmt.Errorf("device-info %s: a file is there that does not name vdpa %s, and netctl did not write it: "+
				"the runtime gives each attachment a path of its own; remove the stale file: %w", path, dev, errs.ErrConflict)
		}
		// Ours: written whole beside it, then renamed over it.
		f, err = os.CreateTemp(filepath.Dir(path), ".netctl-devinfo-*")
		if err == nil {
			path = f.Name()
		}
	}
	if err != nil {
		return fmt.Errorf("device-info %s: %w", target, err)
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && path != target {
		err = os.Rename(path, target)
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("device-info %s: %w", target, err)
	}
	return nil
}

// namesDevice says whether the device-info file at path names dev.
func namesDevice(path, dev string) bool {
	b, err := readBounded(path, 64<<10, false)
	if err != nil {
		return false
	}
	var d DeviceInfo
	return json.Unmarshal(b, &d) == nil && d.VDPA != nil && d.VDPA.ParentDevice == dev
}

// removeDeviceInfo removes the device-info file if it names dev.
func removeDeviceInfo(path, dev string) {
	if namesDevice(path, dev) {
		os.Remove(path)
	}
}
