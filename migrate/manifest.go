package migrate

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/state"
	"github.com/netctl/netctl/virtio"
)

// Schema is the manifest's format version.
const Schema = 1

// MaxManifest bounds a manifest read from outside (a few KiB per NIC).
const MaxManifest = 1 << 20

// MaxNICs bounds the NICs of one manifest.
const MaxNICs = 64

// Manifest is what a VM's netctl NICs are on the source, for the
// destination to re-create them (netctl migrate export, then incoming).
type Manifest struct {
	Schema      int    `json:"schema"`
	VM          string `json:"vm"`
	Source      string `json:"source_host,omitempty"`
	QEMUVersion string `json:"qemu_version"`
	Machine     string `json:"machine"`
	NICs        []NIC  `json:"nics"`
}

// NIC is one NIC as the destination needs it.
type NIC struct {
	ID     string `json:"id"`
	MAC    string `json:"mac"`
	Queues int    `json:"queues"`
	MTU    int    `json:"mtu,omitempty"`
	// Backend on the source; the destination decides its own.
	Backend string `json:"backend"`
	Profile string `json:"profile"`
	// Bus and Addr are the device's place: the destination's must be the
	// same for QEMU to load the device's state.
	Bus  string `json:"bus,omitempty"`
	Addr string `json:"addr"`
	// Offered are the features the source's device offered (its record);
	// Negotiated those the guest acknowledged, when QEMU said (the
	// destination must offer every one of them).
	Offered    []string `json:"offered"`
	Negotiated []string `json:"negotiated,omitempty"`
	Pool       string   `json:"pool,omitempty"`
	// Host side: an existing tap netctl did not create (the destination
	// opens the tap of that name, never one another VM holds queues on:
	// sharing a tap is the destination operator's word, netctl attach
	// --shared-tap, so a manifest has no shared_tap), a macvtap on Lower
	// (mode), a vdpa device netctl created on Mgmtdev or an existing one
	// (VDPA).
	Tap        string            `json:"tap,omitempty"`
	MacvtapOn  string            `json:"macvtap,omitempty"` // LOWER:MODE
	VDPA       string            `json:"vdpa,omitempty"`
	Mgmtdev    string            `json:"mgmtdev,omitempty"`
	Properties map[string]string `json:"properties,omitempty"`
}

// features parses names as the record and manifest spell them.
func features(names []string) (virtio.Features, error) {
	var f virtio.Features
	for _, n := range names {
		b, ok := virtio.ParseFeature(n)
		if !ok {
			return 0, fmt.Errorf("feature %.40q is no virtio feature netctl knows", n)
		}
		f |= b
	}
	return f, nil
}

// Parse reads and checks a manifest (untrusted: it may come from another
// host). Errors wrap errs.ErrInvalid.
func Parse(b []byte) (*Manifest, error) {
	if len(b) > MaxManifest {
		return nil, fmt.Errorf("migrate: a manifest of %d bytes, more than %d: %w", len(b), MaxManifest, errs.ErrInvalid)
	}
	var m Manifest
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&m); err != nil {
		return nil, fmt.Errorf("migrate: not a manifest (netctl migrate export --vm VM > FILE writes one): %w: %w", err, errs.ErrInvalid)
	}
	if d.More() {
		return nil, fmt.Errorf("migrate: a manifest file holds one manifest: %w", errs.ErrInvalid)
	}
	if m.Schema != Schema {
		return nil, fmt.Errorf("migrate: manifest schema %d, this netctl reads %d: export it with the same netctl version: %w", m.Schema, Schema, errs.ErrInvalid)
	}
	if len(m.NICs) == 0 || len(m.NICs) > MaxNICs {
		return nil, fmt.Errorf("migrate: the manifest has %d NICs: 1 to %d: %w", len(m.NICs), MaxNICs, errs.ErrInvalid)
	}
	if m.VM != "" {
		if err := state.CheckVMName(m.VM); err != nil {
			return nil, fmt.Errorf("migrate: manifest: %w", err)
		}
	}
	seen := map[string]bool{}
	for i, n := range m.NICs {
		if err := state.CheckID(n.ID); err != nil {
			return nil, fmt.Errorf("migrate: manifest NIC %d: %w", i, err)
		}
		if seen[n.ID] {
			return nil, fmt.Errorf("migrate: manifest names NIC %s twice: %w", n.ID, errs.ErrInvalid)
		}
		seen[n.ID] = true
		off, err := features(n.Offered)
		if err != nil {
			return nil, fmt.Errorf("migrate: manifest NIC %s offered: %w: %w", n.ID, err, errs.ErrInvalid)
		}
		neg, err := features(n.Negotiated)
		if err != nil {
			return nil, fmt.Errorf("migrate: manifest NIC %s negotiated: %w: %w", n.ID, err, errs.ErrInvalid)
		}
		// Offered names the bits netctl decides (the record's features).
		if bad := neg & policy.Managed() &^ off; bad != 0 && len(n.Offered) > 0 {
			return nil, fmt.Errorf("migrate: manifest NIC %s: negotiated %v were never offered: %w", n.ID, bad, errs.ErrInvalid)
		}
		if n.Queues < 1 || n.Queues > 256 || n.MTU < 0 || n.MTU > 65535 || len(n.Properties) > 64 {
			return nil, fmt.Errorf("migrate: manifest NIC %s: queues %d, mtu %d, %d properties: out of range: %w", n.ID, n.Queues, n.MTU, len(n.Properties), errs.ErrInvalid)
		}
	}
	return &m, nil
}
