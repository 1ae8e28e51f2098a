package diagnose

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/netctl/netctl/policy/probe"
)

// Format names the snapshot layout; Load refuses other layouts.
const Format = "netctl-diagnose/1"

// Snapshot is everything Explain needs, as Gather read it. It is what
// netctl diagnose --save writes and --from reads.
type Snapshot struct {
	Format string          `json:"format"`
	QEMU   string          `json:"qemu"`          // QEMU's version ("7.2.22")
	NIC    string          `json:"nic"`           // the NIC's qdev id
	Path   string          `json:"path"`          // QOM path of its virtio backend
	Status json.RawMessage `json:"virtio_status"` // x-query-virtio-status, verbatim
	// Props are the NIC's feature properties (qom-get); a property QEMU
	// does not have is absent. Nil when not read.
	Props  map[string]bool `json:"props,omitempty"`
	Netdev Netdev          `json:"netdev"`
	Tap    *TapState       `json:"tap,omitempty"`
	VDPA   *VDPAState      `json:"vdpa,omitempty"`
	Lower  *Lower          `json:"lower,omitempty"`
	Host   *probe.Result   `json:"host,omitempty"`   // netctl probe of the host QEMU runs on
	Errors []string        `json:"errors,omitempty"` // what could not be read, and why
}

// Netdev is the NIC's backend as QEMU describes it (info network).
type Netdev struct {
	ID      string            `json:"id"`
	Type    string            `json:"type"` // tap, vhost-vdpa, user, vhost-user, ...
	Options map[string]string `json:"options,omitempty"`
}

// TapState is a tap or macvtap backend as the host kernel sees it.
type TapState struct {
	Name     string   `json:"name"`
	Macvtap  bool     `json:"macvtap,omitempty"`
	Queues   int      `json:"queues"`            // QEMU's file descriptors on it
	VnetHdr  bool     `json:"vnet_hdr"`          // IFF_VNET_HDR
	HdrLen   int      `json:"hdr_len,omitempty"` // TUNGETVNETHDRSZ; 0 if unread
	Offloads []string `json:"offloads"`          // tap offloads on now (read back through ethtool)
	// OffloadsUnknown: a macvtap applies the offloads set on it inside its
	// receive path and shows none of them, so they cannot be read back.
	OffloadsUnknown bool     `json:"offloads_unknown,omitempty"`
	Features        []string `json:"ethtool,omitempty"` // the tap's active ethtool features
}

// VDPAState is a vhost-vdpa backend's device as the vdpa family reports it.
type VDPAState struct {
	Device        string `json:"device"`
	VhostPath     string `json:"vhost_path,omitempty"`
	MgmtDev       string `json:"mgmtdev,omitempty"`
	Features      uint64 `json:"features"`   // what the device offers
	Negotiated    uint64 `json:"negotiated"` // after FEATURES_OK
	HasNegotiated bool   `json:"has_negotiated"`
	MgmtFeatures  uint64 `json:"mgmtdev_features,omitempty"` // what the parent supports
}

// Lower is the device under the backend (a macvtap's link, or one named
// with --lower) and its active ethtool features.
type Lower struct {
	Name     string          `json:"name"`
	Features map[string]bool `json:"features"`
}

// Save writes s as indented JSON.
func (s *Snapshot) Save(path string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// Load reads a snapshot written by Save (netctl diagnose --save), or a
// bare x-query-virtio-status reply, as virsh qemu-monitor-command prints
// it ({"return": {...}, "id": ...}) for a VM whose QMP socket libvirt
// holds. A bare reply has no backend state: add it with ReadTap.
func Load(path string) (*Snapshot, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("diagnose: %w", err)
	}
	var probe struct {
		Format   string          `json:"format"`
		Return   json.RawMessage `json:"return"`
		DeviceID *int            `json:"device-id"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return nil, fmt.Errorf("diagnose: %s is not a snapshot (write one with netctl diagnose --qmp SOCKET --save FILE): %w", path, err)
	}
	switch {
	case probe.Format == "" && len(probe.Return) > 0:
		return &Snapshot{Format: Format, Status: probe.Return}, nil
	case probe.Format == "" && probe.DeviceID != nil:
		return &Snapshot{Format: Format, Status: b}, nil
	}
	s := &Snapshot{}
	if err := json.Unmarshal(b, s); err != nil {
		return nil, fmt.Errorf("diagnose: %s is not a snapshot (write one with netctl diagnose --qmp SOCKET --save FILE): %w", path, err)
	}
	if s.Format != Format {
		return nil, fmt.Errorf("diagnose: %s has format %q, want %q (write one with netctl diagnose --qmp SOCKET --save FILE, "+
			"or save QEMU's x-query-virtio-status reply)", path, s.Format, Format)
	}
	if len(s.Status) == 0 {
		return nil, fmt.Errorf("diagnose: %s has no virtio_status", path)
	}
	return s, nil
}
