package host

import "github.com/netctl/netctl/virtio"

// Schema names the document format. It changes when a field changes
// meaning; Parse refuses any other value.
const Schema = "netctl.probe/v1"

// Description is what netctl probe found on one host. The JSON keys are
// stable. Each section says on its own whether it could be read: a section
// that could not is reported with its reason (Error) and the others are
// kept, so a probe without root still says what it could see.
type Description struct {
	Schema   string   `json:"schema"`   // Schema
	Hostname string   `json:"hostname"` // the host's name (uname -n); hosts are known by it
	Kernel   string   `json:"kernel"`   // uname -r
	VhostNet VhostNet `json:"vhost_net"`
	Tap      Tap      `json:"tap"`
	Macvtap  Macvtap  `json:"macvtap"`
	VDPA     VDPA     `json:"vdpa"`
	ZeroCopy ZeroCopy `json:"zerocopy"`
	QEMU     QEMU     `json:"qemu"`
	Devices  []Device `json:"devices,omitempty"` // the devices asked for (--dev), in the order asked
}

// VhostNet is /dev/vhost-net's state.
type VhostNet struct {
	Available     bool     `json:"available"`
	Error         string   `json:"error,omitempty"`
	Features      []string `json:"features,omitempty"`
	FeaturesHex   string   `json:"features_hex,omitempty"`
	MaxMemRegions int      `json:"max_mem_regions,omitempty"`
	// BusyPoll is whether a ring took a busy-poll timeout and read it
	// back (VHOST_SET/GET_VRING_BUSYLOOP_TIMEOUT, Linux 4.6); nil when it
	// could not be measured, with the reason in BusyPollError.
	BusyPoll      *bool  `json:"busy_poll"`
	BusyPollError string `json:"busy_poll_error,omitempty"`
	ForkFromOwner bool   `json:"fork_from_owner"` // VHOST_SET_FORK_FROM_OWNER (Linux 6.17, and Debian's 6.12 with the backport)
}

// FeatureWord is the features vhost-net offers, as a word (names that do
// not parse are left out).
func (v VhostNet) FeatureWord() virtio.Features { return parseNames(v.Features) }

// Tap is tun's state and the offloads a tap really takes (found by trial).
type Tap struct {
	Available bool     `json:"available"`
	Error     string   `json:"error,omitempty"`
	Offloads  []string `json:"offloads"`
}

// Macvtap says whether macvtap links can be made, and their offloads.
type Macvtap struct {
	Available bool     `json:"available"`
	Error     string   `json:"error,omitempty"`
	Offloads  []string `json:"offloads,omitempty"`
}

// VDPA is the vdpa family's state.
type VDPA struct {
	Available bool         `json:"available"`
	Error     string       `json:"error,omitempty"`
	MgmtDevs  []string     `json:"mgmtdevs"`
	Devices   []VDPADevice `json:"devices"`
}

// VDPADevice is a vdpa device, its bus driver and the features the device
// itself offers (vdpa dev config show).
type VDPADevice struct {
	Name        string   `json:"name"`
	Driver      string   `json:"driver"`
	Features    []string `json:"features,omitempty"`
	FeaturesHex string   `json:"features_hex,omitempty"`
	Error       string   `json:"error,omitempty"` // why the driver or the features could not be read
	// Migration: can the host's QEMU live-migrate a VM using it (netctl
	// probe; nil from a probe that did not look, such as attach's).
	Migration *VDPAMigration `json:"migration,omitempty"`
}

// FeatureWord is the device's features as a word; ok is false when the
// probe could not read them.
func (d VDPADevice) FeatureWord() (f virtio.Features, ok bool) {
	if d.FeaturesHex == "" && len(d.Features) == 0 {
		return 0, false
	}
	return parseNames(d.Features), true
}

// ZeroCopy is vhost-net's zero-copy TX state.
type ZeroCopy struct {
	Loaded    bool   `json:"loaded"`    // the vhost_net module is loaded
	Enabled   bool   `json:"enabled"`   // experimental_zcopytx is on
	Threshold int    `json:"threshold"` // frames shorter than this are copied anyway
	Advice    string `json:"advice,omitempty"`
	Error     string `json:"error,omitempty"`
}

// QEMU is the QEMU installed on the host, if any.
type QEMU struct {
	Binary  string `json:"binary,omitempty"`
	Version string `json:"version,omitempty"` // "7.2.22"
	Error   string `json:"error,omitempty"`
}

// Device is one network device asked for with --dev.
type Device struct {
	Name     string          `json:"name"`
	Error    string          `json:"error,omitempty"`
	Features map[string]bool `json:"features,omitempty"` // ethtool feature -> active
}

func parseNames(names []string) virtio.Features {
	var f virtio.Features
	for _, n := range names {
		if b, ok := virtio.ParseFeature(n); ok {
			f |= b
		}
	}
	return f
}
