package diagnose

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/netctl/netctl/virtio"
)

// qemuFeatures is QEMU's VirtioDeviceFeatures: names with descriptions
// ("VIRTIO_NET_F_CSUM: Device handling packets with ...") and the bits
// it has no name for.
type qemuFeatures struct {
	Transports []string `json:"transports"`
	Dev        []string `json:"dev-features"`
	Unknown    uint64   `json:"unknown-dev-features"`
	Unknown2   uint64   `json:"unknown-dev-features2"` // bits 64-127 (QEMU 10.2+)
}

// qemuVhost is the vhost-dev member QEMU adds when a vhost backend runs.
type qemuVhost struct {
	Features        qemuFeatures `json:"features"`
	AckedFeatures   qemuFeatures `json:"acked-features"`
	BackendFeatures qemuFeatures `json:"backend-features"`
}

// qemuStatus is the part of x-query-virtio-status diagnose reads.
type qemuStatus struct {
	Name         string       `json:"name"`
	DeviceID     int          `json:"device-id"`
	VhostStarted bool         `json:"vhost-started"`
	Host         qemuFeatures `json:"host-features"`
	Guest        qemuFeatures `json:"guest-features"`
	Backend      qemuFeatures `json:"backend-features"`
	Status       struct {
		Statuses []string `json:"statuses"`
	} `json:"status"`
	NumVQs int        `json:"num-vqs"`
	Vhost  *qemuVhost `json:"vhost-dev"`
}

// qemuAliases are names QEMU prints that the kernel headers spell
// differently, or bits outside the virtio word's names.
var qemuAliases = map[string]virtio.Features{
	"VIRTIO_F_IOMMU_PLATFORM":        virtio.AccessPlatform,
	"VHOST_NET_F_VIRTIO_NET_HDR":     virtio.AnyLayout,
	"VHOST_USER_F_PROTOCOL_FEATURES": virtio.Bit(30),
	"VIRTIO_F_BAD_FEATURE":           virtio.Bit(30),
}

// word turns QEMU's names back into the 64-bit feature word. Names it
// cannot place are returned; bits above 63 are left out.
func (q qemuFeatures) word() (virtio.Features, []string) {
	f := virtio.Features(q.Unknown)
	var unknown []string
	for _, s := range append(append([]string{}, q.Transports...), q.Dev...) {
		name, desc, _ := strings.Cut(s, ":")
		name = strings.TrimSpace(name)
		// QEMU 8.2 to 10.0 print GUEST_USO6 under GUEST_USO4's name.
		if name == "VIRTIO_NET_F_GUEST_USO4" && strings.Contains(desc, "USOv6") {
			name = "VIRTIO_NET_F_GUEST_USO6"
		}
		if b, ok := qemuAliases[name]; ok {
			f |= b
			continue
		}
		if b, ok := virtio.ParseFeature(name); ok && !strings.HasPrefix(name, "bit ") {
			f |= b
			continue
		}
		if strings.Contains(name, "UDP_TUNNEL") { // bits 65-68 (QEMU 10.2): beyond the 64-bit word
			continue
		}
		unknown = append(unknown, name)
	}
	return f, unknown
}

// status names without QEMU's descriptions, in negotiation order.
var statusOrder = []string{"ACKNOWLEDGE", "DRIVER", "FEATURES_OK", "DRIVER_OK", "NEEDS_RESET", "FAILED"}

func (q *qemuStatus) statuses() []string {
	have := map[string]bool{}
	for _, s := range q.Status.Statuses {
		name, _, _ := strings.Cut(s, ":")
		have[strings.TrimPrefix(strings.TrimSpace(name), "VIRTIO_CONFIG_S_")] = true
	}
	var out []string
	for _, n := range statusOrder {
		if have[n] {
			out = append(out, n)
		}
	}
	return out
}

// Bounds on what a status may list: QEMU names each of a device's feature
// bits (at most 128, in two words) once, and a device has six status bits.
const (
	maxFeatureNames = 128
	maxStatuses     = 16
)

// parseStatus decodes an x-query-virtio-status reply and checks that it is
// a virtio-net device's and that no list is longer than QEMU makes it.
func parseStatus(raw json.RawMessage) (*qemuStatus, error) {
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		return nil, fmt.Errorf("the x-query-virtio-status reply is not a JSON object: %w", ErrInvalid)
	}
	q := &qemuStatus{}
	if err := json.Unmarshal(raw, q); err != nil {
		return nil, fmt.Errorf("x-query-virtio-status reply: %v: %w", err, ErrInvalid)
	}
	if q.DeviceID != 1 {
		return nil, fmt.Errorf("the device is %q (virtio id %d), not virtio-net: pick the NIC with --id: %w", q.Name, q.DeviceID, ErrInvalid)
	}
	lists := map[string]qemuFeatures{"host-features": q.Host, "guest-features": q.Guest, "backend-features": q.Backend}
	if q.Vhost != nil {
		lists["vhost-dev.features"], lists["vhost-dev.acked-features"], lists["vhost-dev.backend-features"] =
			q.Vhost.Features, q.Vhost.AckedFeatures, q.Vhost.BackendFeatures
	}
	for name, l := range lists {
		if n := len(l.Transports) + len(l.Dev); n > maxFeatureNames {
			return nil, fmt.Errorf("x-query-virtio-status lists %d feature names in %s; a virtio device has at most %d: %w",
				n, name, maxFeatureNames, ErrInvalid)
		}
	}
	if n := len(q.Status.Statuses); n > maxStatuses {
		return nil, fmt.Errorf("x-query-virtio-status lists %d device statuses; there are at most %d: %w", n, maxStatuses, ErrInvalid)
	}
	return q, nil
}
