package diagnose

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/netctl/netctl/internal/errs"
)

// Format names the snapshot layout; Load refuses other layouts.
const Format = "netctl-diagnose/1"

// MaxSnapshotSize bounds what Load and Decode read. A real snapshot takes
// a few KiB (QEMU's status reply about 4 KiB, the host probe about 1 KiB);
// a file over 4 MiB is refused before it is parsed.
const MaxSnapshotSize = 4 << 20

// ErrInvalid is wrapped by the errors of Load and Decode for input that
// is not a snapshot or a QMP reply netctl can explain (the same value as
// the other packages' ErrInvalid).
var ErrInvalid = errs.ErrInvalid

// Snapshot is everything Explain needs, as the gathering (package
// policy/diagnose/gather) read it. It is what netctl diagnose --save
// writes and --from reads. It holds no file descriptors.
type Snapshot struct {
	Format string          `json:"format"`
	QEMU   string          `json:"qemu"`          // QEMU's version ("7.2.22")
	NIC    string          `json:"nic"`           // the NIC's qdev id
	Path   string          `json:"path"`          // QOM path of its virtio backend
	Status json.RawMessage `json:"virtio_status"` // x-query-virtio-status, verbatim
	// Props are the NIC's feature properties (qom-get); a property QEMU
	// does not have is absent. Nil when not read.
	Props map[string]bool `json:"props,omitempty"`
	// Driver is the NIC's QOM type ("virtio-net-pci"), and Defaults are
	// that type's default feature property values (device-list-properties
	// "default-value"): what the device offers unless something drops it.
	// Nil when not read.
	Driver   string          `json:"driver,omitempty"`
	Defaults map[string]bool `json:"prop_defaults,omitempty"`
	// Cmdline are the feature properties the NIC's -device option sets on
	// QEMU's command line (/proc/PID/cmdline), as given ("off", "false",
	// "on"). Nil when not read; empty when the option sets none. QEMU
	// writes what a vhost backend refused back into some properties
	// (queue_reset reads false on a kernel whose vhost-net lacks
	// RING_RESET), so only this tells a user's "off" from a refusal.
	// Saved as null when not read and {} when read and empty, so --from
	// tells the two apart as the live run did.
	Cmdline map[string]string `json:"cmdline_props"`
	Netdev  Netdev            `json:"netdev"`
	Tap     *TapState         `json:"tap,omitempty"`
	VDPA    *VDPAState        `json:"vdpa,omitempty"`
	Lower   *Lower            `json:"lower,omitempty"`
	// Host is netctl probe --json of the host QEMU runs on, verbatim (nil
	// when not probed). Explain reads its kernel and tap and macvtap
	// offloads (see HostProbe).
	Host   json.RawMessage `json:"host,omitempty"`
	Errors []string        `json:"errors,omitempty"` // what could not be read, and why
}

// HostProbe is the part of a host probe (netctl probe --json) that
// Explain reads; the keys are the probe's.
type HostProbe struct {
	Kernel  string         `json:"kernel"`
	Tap     ProbedOffloads `json:"tap"`
	Macvtap ProbedOffloads `json:"macvtap"`
}

// ProbedOffloads are the offloads a scratch tap or macvtap took when
// probed.
type ProbedOffloads struct {
	Available bool     `json:"available"`
	Offloads  []string `json:"offloads"`
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

// Note records what could not be read, and why, in s.Errors.
func (s *Snapshot) Note(format string, args ...any) {
	s.Errors = append(s.Errors, fmt.Sprintf(format, args...))
}

// HostProbe decodes the part of s.Host that Explain reads; nil when the
// host was not probed.
func (s *Snapshot) HostProbe() (*HostProbe, error) {
	if len(s.Host) == 0 || string(s.Host) == "null" {
		return nil, nil
	}
	h := &HostProbe{}
	if err := json.Unmarshal(s.Host, h); err != nil {
		return nil, fmt.Errorf("the host probe (\"host\") is not netctl probe --json output: %v: %w", err, ErrInvalid)
	}
	return h, nil
}

// Encode returns s as indented JSON, as Save writes it.
func (s *Snapshot) Encode() ([]byte, error) {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("diagnose: encode the snapshot: %w", err)
	}
	return append(b, '\n'), nil
}

// Save writes s as indented JSON to path (mode 0644, replacing the file).
func (s *Snapshot) Save(path string) error {
	b, err := s.Encode()
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// Load reads a snapshot written by Save (netctl diagnose --save), or a
// bare x-query-virtio-status reply, as virsh qemu-monitor-command prints
// it ({"return": {...}, "id": ...}) for a VM whose QMP socket libvirt
// holds. A bare reply has no backend state: add it with gather.ReadTap.
// A file over MaxSnapshotSize is refused unread; see Decode for the rest.
func Load(path string) (*Snapshot, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("diagnose: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxSnapshotSize+1))
	if err != nil {
		return nil, fmt.Errorf("diagnose: %w", err)
	}
	s, err := Decode(b)
	if err != nil {
		return nil, fmt.Errorf("diagnose: %s: %w", path, err)
	}
	return s, nil
}

// Decode parses what Load reads: a snapshot, a QMP reply
// ({"return": STATUS}) or a bare x-query-virtio-status value. It checks
// that the status is a virtio-net device's and that every list in it is
// no longer than a virtio device can make it, so that Explain has nothing
// left to refuse. Errors wrap ErrInvalid and say what to give instead.
func Decode(b []byte) (*Snapshot, error) {
	if len(b) > MaxSnapshotSize {
		return nil, fmt.Errorf("over %d MiB: a snapshot (netctl diagnose --save) or a QMP reply takes a few KiB: %w", MaxSnapshotSize>>20, ErrInvalid)
	}
	var shape struct {
		Format   string          `json:"format"`
		Return   json.RawMessage `json:"return"`
		Error    *qmpError       `json:"error"`
		DeviceID *int            `json:"device-id"`
	}
	if err := json.Unmarshal(b, &shape); err != nil {
		return nil, notSnapshot(err)
	}
	var s *Snapshot
	switch {
	case shape.Format == "" && shape.Error != nil:
		return nil, fmt.Errorf("this is QEMU's error reply (%s: %s), not a status: save the reply to x-query-virtio-status "+
			"for the NIC's path (/machine/peripheral/ID/virtio-backend): %w", shape.Error.Class, shape.Error.Desc, ErrInvalid)
	case shape.Format == "" && len(shape.Return) > 0:
		s = &Snapshot{Format: Format, Status: shape.Return}
	case shape.Format == "" && shape.DeviceID != nil:
		s = &Snapshot{Format: Format, Status: bytes.TrimSpace(b)}
	default:
		s = &Snapshot{}
		if err := json.Unmarshal(b, s); err != nil {
			return nil, notSnapshot(err)
		}
		if s.Format != Format {
			return nil, fmt.Errorf("format %q, want %q (write one with netctl diagnose --qmp SOCKET --save FILE, "+
				"or save QEMU's x-query-virtio-status reply): %w", s.Format, Format, ErrInvalid)
		}
		if len(s.Status) == 0 || string(s.Status) == "null" {
			return nil, fmt.Errorf("no virtio_status (QEMU's x-query-virtio-status reply): %w", ErrInvalid)
		}
	}
	if _, err := parseStatus(s.Status); err != nil {
		return nil, err
	}
	h, err := s.HostProbe()
	if err != nil {
		return nil, err
	}
	if err := s.checkCounts(h); err != nil {
		return nil, err
	}
	return s, nil
}

// maxEntries bounds every list and map of a snapshot. The real ones are
// far smaller: about 40 NIC properties, 70 ethtool features, a dozen
// netdev options, 7 tap offloads and a few notes.
const maxEntries = 1024

// checkCounts refuses a snapshot with a list or map over maxEntries.
func (s *Snapshot) checkCounts(h *HostProbe) error {
	counts := map[string]int{"props": len(s.Props), "netdev.options": len(s.Netdev.Options), "errors": len(s.Errors),
		"prop_defaults": len(s.Defaults), "cmdline_props": len(s.Cmdline)}
	if s.Tap != nil {
		counts["tap.offloads"], counts["tap.ethtool"] = len(s.Tap.Offloads), len(s.Tap.Features)
	}
	if s.Lower != nil {
		counts["lower.features"] = len(s.Lower.Features)
	}
	if h != nil {
		counts["host.tap.offloads"], counts["host.macvtap.offloads"] = len(h.Tap.Offloads), len(h.Macvtap.Offloads)
	}
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		if counts[k] > maxEntries {
			return fmt.Errorf("%q has %d entries (at most %d): %w", k, counts[k], maxEntries, ErrInvalid)
		}
	}
	return nil
}

func notSnapshot(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	what := "not JSON"
	switch {
	case errors.As(err, &te) && te.Field != "":
		what = fmt.Sprintf("%q is a JSON %s, where a snapshot has a %s", te.Field, te.Value, te.Type)
	case errors.As(err, &te):
		what = fmt.Sprintf("a JSON %s, not an object", te.Value)
	case errors.As(err, &se) && strings.Contains(se.Error(), "unexpected end"):
		what = "truncated JSON"
	case errors.As(err, &se):
		what = fmt.Sprintf("not JSON (%v at byte %d)", se, se.Offset)
	}
	return fmt.Errorf("not a snapshot: %s (write one with netctl diagnose --qmp SOCKET --save FILE, "+
		"or save QEMU's x-query-virtio-status reply): %w", what, ErrInvalid)
}

// qmpError is the error member of a QMP reply.
type qmpError struct {
	Class string `json:"class"`
	Desc  string `json:"desc"`
}
