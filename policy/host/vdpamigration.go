package host

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// VDPAMigration says whether the host's QEMU can live-migrate a VM whose
// NIC is this vdpa device, and why not. policy.VDPAMigration decides it
// from Facts and the host's QEMU version; netctl probe writes both.
type VDPAMigration struct {
	// OK: QEMU sets no migration blocker for the device.
	OK bool `json:"ok"`
	// Reason says why not (QEMU's own blocker message where it has one),
	// or, when OK, what the downtime depends on. "unknown: ..." when the
	// device could not be looked at (in use by a VM, not bound to
	// vhost_vdpa).
	Reason string `json:"reason"`
	// Suspend: the device offers VHOST_BACKEND_F_SUSPEND, so QEMU stops it
	// without a reset when it switches to shadow virtqueues (a shorter
	// downtime).
	Suspend bool `json:"suspend"`
	// Facts are what the probe read from /dev/vhost-vdpa-N; nil when it
	// was not opened.
	Facts *VDPAFacts `json:"facts,omitempty"`
}

// VDPAFacts are a vdpa device's answers on its vhost-vdpa node that QEMU's
// shadow virtqueues depend on.
type VDPAFacts struct {
	// BackendFeatures is VHOST_GET_BACKEND_FEATURES (hex).
	BackendFeatures string `json:"backend_features"`
	// Features is VHOST_GET_FEATURES (hex): what QEMU reads.
	Features string `json:"features"`
	// VQs is VHOST_VDPA_GET_VQS_COUNT.
	VQs uint32 `json:"vqs"`
	// Groups and AddressSpaces are VHOST_VDPA_GET_GROUP_NUM and
	// VHOST_VDPA_GET_AS_NUM (0: the kernel does not say).
	Groups        uint32 `json:"groups"`
	AddressSpaces uint32 `json:"address_spaces"`
	// CVQOwnGroup: the control virtqueue's group (VHOST_VDPA_GET_VRING_GROUP
	// on its index) is no data virtqueue's group. Nil when the device has
	// no control virtqueue or the groups could not be read (GroupError).
	CVQOwnGroup *bool  `json:"cvq_own_group,omitempty"`
	GroupError  string `json:"group_error,omitempty"`
}

// Word parses a hex word the probe wrote; ok is false for anything else.
func Word(s string) (uint64, bool) {
	t, ok := strings.CutPrefix(s, "0x")
	if !ok || t == "" || len(t) > 16 {
		return 0, false
	}
	v, err := strconv.ParseUint(t, 16, 64)
	return v, err == nil
}

// maxReason bounds a migration reason read from another host's probe.
const maxReason = 2048

func (m *VDPAMigration) validate(dev string) error {
	if len(m.Reason) > maxReason || strings.IndexFunc(m.Reason, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return fmt.Errorf("vdpa device %.64q: migration.reason: want up to %d printable characters: %w", dev, maxReason, ErrInvalid)
	}
	f := m.Facts
	if f == nil {
		return nil
	}
	if _, ok := Word(f.BackendFeatures); !ok {
		return fmt.Errorf("vdpa device %.64q: migration.facts.backend_features %.32q: want a hex word (0x...): %w", dev, f.BackendFeatures, ErrInvalid)
	}
	if _, ok := Word(f.Features); !ok {
		return fmt.Errorf("vdpa device %.64q: migration.facts.features %.32q: want a hex word (0x...): %w", dev, f.Features, ErrInvalid)
	}
	if len(f.GroupError) > maxReason || strings.IndexFunc(f.GroupError, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return fmt.Errorf("vdpa device %.64q: migration.facts.group_error: want up to %d printable characters: %w", dev, maxReason, ErrInvalid)
	}
	return nil
}
