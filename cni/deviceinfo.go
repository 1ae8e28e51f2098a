package cni

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

// writeDeviceInfo writes the device-info file unless one is there (the
// spec: the runtime gives a unique path; a file there is someone else's
// and is left alone), creating its directory.
func writeDeviceInfo(path, dev, vhost string) error {
	b, err := json.Marshal(DeviceInfo{Type: "vdpa", Version: "1.1.0", VDPA: &VDPAInfo{ParentDevice: dev, Driver: "vhost", Path: vhost}})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("device-info %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil
		}
		return fmt.Errorf("device-info %s: %w", path, err)
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("device-info %s: %w", path, err)
	}
	return nil
}

// removeDeviceInfo removes the device-info file if it names dev.
func removeDeviceInfo(path, dev string) {
	b, err := readBounded(path, 64<<10, false)
	if err != nil {
		return
	}
	var d DeviceInfo
	if json.Unmarshal(b, &d) == nil && d.VDPA != nil && d.VDPA.ParentDevice == dev {
		os.Remove(path)
	}
}
