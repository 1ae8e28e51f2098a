package kubevirt

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/internal/lazyre"
)

// NetworkInfoPath is where a binding sidecar registered with
// downwardAPI: device-info finds the pod's network-info annotation
// (kubevirt.io/network-info) as a file: pkg/network/downwardapi, MountPath
// /etc/podinfo and NetworkInfoVolumePath network-info.
const NetworkInfoPath = "/etc/podinfo/network-info"

// MaxNetworkInfo bounds the network-info file (an annotation; all of a
// pod's annotations together are at most 256 KiB).
const MaxNetworkInfo = 256 << 10

// networkInfo is the network-info file (pkg/network/downwardapi types.go):
// per VMI network, the device-info Multus copied from the CNI's
// CNIDeviceInfoFile (NPWG device-info-spec v1.1.0).
type networkInfo struct {
	Interfaces []struct {
		Network    string `json:"network"`
		DeviceInfo *struct {
			Type string `json:"type"`
			VDPA *struct {
				Path string `json:"path"`
			} `json:"vdpa"`
		} `json:"deviceInfo"`
	} `json:"interfaces"`
}

// vdpaPath is a vhost-vdpa character device as the kernel names it.
var vdpaPath = lazyre.New(`^/dev/vhost-vdpa-[0-9]{1,9}$`)

// parseNetworkInfo returns, per VMI network name, the vhost-vdpa device
// the network-info file names for it. Empty input is no file (a binding
// without downwardAPI: device-info, or a tap network). A path that is no
// /dev/vhost-vdpa-N is an error: the file names what QEMU will open.
func parseNetworkInfo(b []byte) (map[string]string, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, nil
	}
	if len(b) > MaxNetworkInfo {
		return nil, fmt.Errorf("network-info of %d bytes, over %d: %w", len(b), MaxNetworkInfo, errs.ErrInvalid)
	}
	var ni networkInfo
	if err := json.Unmarshal(b, &ni); err != nil {
		return nil, fmt.Errorf("network-info (%s): %s: %w", NetworkInfoPath, clip(err.Error()), errs.ErrInvalid)
	}
	if len(ni.Interfaces) > maxInterfaces {
		return nil, fmt.Errorf("network-info: over %d interfaces: %w", maxInterfaces, errs.ErrInvalid)
	}
	out := map[string]string{}
	for _, it := range ni.Interfaces {
		d := it.DeviceInfo
		if d == nil || d.Type != "vdpa" {
			continue
		}
		if d.VDPA == nil || !vdpaPath.MatchString(d.VDPA.Path) {
			p := ""
			if d.VDPA != nil {
				p = d.VDPA.Path
			}
			return nil, fmt.Errorf("network-info: network %s has a vdpa device at %s, which is no /dev/vhost-vdpa-N: "+
				"the CNI plugin publishes the vhost-vdpa device it bound: %w", clip(it.Network), clip(p), errs.ErrInvalid)
		}
		out[it.Network] = d.VDPA.Path
	}
	return out, nil
}
