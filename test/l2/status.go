package l2

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/netctl/netctl/qmp"
)

// Features is QEMU's VirtioDeviceFeatures: names with descriptions
// ("VIRTIO_F_VERSION_1: Device compliant for v1 spec (legacy)") and the
// bits it has no name for.
type Features struct {
	Transports []string `json:"transports"`
	Dev        []string `json:"dev-features"`
	Unknown    uint64   `json:"unknown-dev-features"`
}

// Has says whether the feature called name (VIRTIO_NET_F_MRG_RXBUF) is
// among them.
func (f Features) Has(name string) bool {
	for _, s := range append(append([]string{}, f.Transports...), f.Dev...) {
		if n, _, _ := strings.Cut(s, ":"); strings.TrimSpace(n) == name {
			return true
		}
	}
	return false
}

// Names are the features' names without their descriptions.
func (f Features) Names() []string {
	var out []string
	for _, s := range append(append([]string{}, f.Transports...), f.Dev...) {
		n, _, _ := strings.Cut(s, ":")
		out = append(out, strings.TrimSpace(n))
	}
	return out
}

// VhostDev is the vhost-dev member QEMU 7.2 adds to x-query-virtio-status
// while a vhost backend (vhost-net, vhost-vdpa) serves the device.
type VhostDev struct {
	NVQs          int      `json:"nvqs"`
	MaxQueues     int      `json:"max-queues"`
	Features      Features `json:"features"`
	AckedFeatures Features `json:"acked-features"`
}

// VirtioStatus is the part of x-query-virtio-status these tests read.
type VirtioStatus struct {
	Name         string   `json:"name"`
	Started      bool     `json:"started"`
	VhostStarted bool     `json:"vhost-started"`
	VMRunning    bool     `json:"vm-running"`
	Guest        Features `json:"guest-features"`
	Host         Features `json:"host-features"`
	Status       struct {
		Statuses []string `json:"statuses"`
	} `json:"status"`
	Vhost *VhostDev `json:"vhost-dev"`
	Raw   json.RawMessage
}

// DriverOK says whether the guest's driver set DRIVER_OK.
func (s *VirtioStatus) DriverOK() bool {
	for _, st := range s.Status.Statuses {
		if strings.HasPrefix(st, "VIRTIO_CONFIG_S_DRIVER_OK") {
			return true
		}
	}
	return false
}

// QueryVirtioStatus reads x-query-virtio-status (QEMU 7.2+) of the
// virtio-net-pci device with qdev id: its virtio backend at
// /machine/peripheral/ID/virtio-backend.
func QueryVirtioStatus(ctx context.Context, c *qmp.Client, id string) (*VirtioStatus, error) {
	raw, err := c.Execute(ctx, "x-query-virtio-status", map[string]string{"path": "/machine/peripheral/" + id + "/virtio-backend"})
	if err != nil {
		return nil, err
	}
	var s VirtioStatus
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("x-query-virtio-status of %s: %w", id, err)
	}
	s.Raw = raw
	return &s, nil
}
