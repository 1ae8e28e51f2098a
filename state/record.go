package state

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"time"

	"github.com/netctl/netctl/internal/errs"
)

// Schema names the record format; Parse refuses any other value.
const Schema = "netctl.nic/v1"

// MaxRecordSize bounds a record file: a 256-queue NIC with every name and
// reason takes well under 64 KiB.
const MaxRecordSize = 256 << 10

// ErrInvalid marks a record (or a name) that fails validation; the same
// value as the other netctl packages' ErrInvalid.
var ErrInvalid = errs.ErrInvalid

// Status is where a NIC is in its life.
type Status string

const (
	// StatusAttaching: an intent record, written before attach creates
	// anything: it names what attach is about to create (a vdpa device,
	// a macvtap by name, with ifindex 0 until it exists) and the getfd
	// names it is about to pass. A record still attaching whose VM's lock
	// nobody holds is an attach that was killed: netctl gc, detach, or
	// the same attach again undo what it names.
	StatusAttaching Status = "attaching"
	// StatusAttached: the NIC is in QEMU (as far as netctl knows).
	StatusAttached Status = "attached"
	// StatusDetaching: device_del was sent, DEVICE_DELETED not yet seen.
	StatusDetaching Status = "detaching"
	// StatusDetachTimeout: the guest did not release the NIC before the
	// deadline; QEMU may still complete the unplug later. Run detach again.
	StatusDetachTimeout Status = "detach-timeout"
)

// Link is a tap or macvtap the NIC uses.
type Link struct {
	Name    string `json:"name"`
	Ifindex int    `json:"ifindex,omitempty"`
	Lower   string `json:"lower,omitempty"` // a macvtap's lower device
	Mode    string `json:"mode,omitempty"`  // a macvtap's mode
	// Created: netctl created the link, so detach deletes it (if it is
	// still the same link: same name and ifindex).
	Created bool `json:"created"`
}

// VDPA is the vdpa device a NIC uses.
type VDPA struct {
	Name    string `json:"name"`
	Mgmtdev string `json:"mgmtdev,omitempty"`
	Vhost   string `json:"vhost,omitempty"` // /dev/vhost-vdpa-N
	Created bool   `json:"created"`         // netctl added it (vdpa dev add), so detach deletes it
	// Ino is the identity of a device netctl created (the inode of its
	// sysfs directory, hostnic.VDPAIdentity), so that detach deletes it
	// only while it is still that device; 0 when not kept (the name
	// decides).
	Ino uint64 `json:"ino,omitempty"`
}

// Step is one backend the fallback chain considered (policy.Step).
type Step struct {
	Backend string `json:"backend"`
	Chosen  bool   `json:"chosen"`
	Reason  string `json:"reason"`
}

// NIC is the record of one NIC netctl attached to a VM.
type NIC struct {
	Schema string `json:"schema"`
	VM     string `json:"vm"` // the VM's name (QEMU's -name), or "" when it has none
	// QEMUPID and QEMUStart (field 22 of /proc/PID/stat, in clock ticks
	// since boot) identify the QEMU process: a pid reused by another
	// process has another start time.
	QEMUPID   int    `json:"qemu_pid"`
	QEMUStart uint64 `json:"qemu_start"`
	QMP       string `json:"qmp"` // the QMP socket
	// NetNS is the network namespace netctl attached from (the inode of
	// /proc/thread-self/ns/net), where the NIC's tap or macvtap lives;
	// 0 in records written before it was kept. A link is only deleted
	// from that namespace (ifindexes are per namespace).
	NetNS uint64 `json:"netns,omitempty"`
	// QEMUVersion and Machine are what QEMU said at attach ("7.2.22",
	// "pc-i440fx-7.2-machine").
	QEMUVersion string `json:"qemu_version,omitempty"`
	Machine     string `json:"machine,omitempty"`
	ID          string `json:"id"`     // the device id (device_add id=)
	Netdev      string `json:"netdev"` // the netdev id (netdev_add id=)
	Backend     string `json:"backend"`
	Queues      int    `json:"queues"`
	MAC         string `json:"mac"`
	MTU         int    `json:"mtu,omitempty"`
	Tap         *Link  `json:"tap,omitempty"`
	Macvtap     *Link  `json:"macvtap,omitempty"`
	VDPA        *VDPA  `json:"vdpa,omitempty"`
	// FDNames are the getfd names passed; QEMU consumed them at
	// netdev_add.
	FDNames []string `json:"fd_names"`
	// FDSets are add-fd sets netctl created (removed at detach).
	FDSets     []int             `json:"fdsets,omitempty"`
	Features   []string          `json:"features"`       // offered to the guest
	Pool       string            `json:"pool,omitempty"` // the plan's feature set id the NIC is pinned to (attach --plan)
	Properties map[string]string `json:"properties"`     // virtio-net-pci properties set
	Steps      []Step            `json:"steps"`
	BusyPollUS uint32            `json:"busy_poll_us,omitempty"`
	Status     Status            `json:"status"`
	Attached   time.Time         `json:"attached"`
	// Note says why the status is what it is (a detach timeout).
	Note string `json:"note,omitempty"`
	// Libvirt: the NIC was attached to a libvirt domain through libvirt's
	// API (netctl attach --vm DOMAIN); the record is keyed by the
	// domain's UUID (LibvirtKey), QEMUPID and QMP may be unknown (0, "").
	Libvirt *Libvirt `json:"libvirt,omitempty"`
}

// Libvirt is the libvirt domain a NIC was attached to.
type Libvirt struct {
	URI  string `json:"uri"`  // the connection netctl used (qemu:///system)
	UUID string `json:"uuid"` // the domain's, canonical lower case
	// Alias is the device's alias in the domain (ua-netctl-ID): detach
	// and the hook find the interface by it.
	Alias string `json:"alias"`
	// Persistent: the interface was added to the persistent definition
	// too (--persistent).
	Persistent bool `json:"persistent,omitempty"`
}

// LibvirtKey is the record key of a libvirt domain's NICs: its UUID,
// after a prefix no VM name's key (VMKey) can have ('=' is not in a
// literal key).
func LibvirtKey(uuid string) string { return "lv=" + uuid }

// LibvirtLockKey is the key of the lock of one NIC (id) of a libvirt
// domain: per NIC, not per domain, since an attach holds it across
// libvirt's hotplug, which may wait for the domain's own job (a destroy
// running the hook's release, which takes the locks of the NICs already
// attached): a per-domain lock would keep those NICs from release.
func LibvirtLockKey(uuid, id string) string { return LibvirtKey(uuid) + "@" + id }

// Key is the key the record is stored under: LibvirtKey of the domain's
// UUID for a libvirt domain's NIC, else KeyFor(VM, QMP).
func (n *NIC) Key() string {
	if n.Libvirt != nil {
		return LibvirtKey(n.Libvirt.UUID)
	}
	return KeyFor(n.VM, n.QMP)
}

// legacyKey is Key as older netctl wrote it (libvirt records are new).
func (n *NIC) legacyKey() string {
	if n.Libvirt != nil {
		return n.Key()
	}
	return legacyKeyFor(n.VM, n.QMP)
}

// A NIC id is a QEMU id (IsQEMUID) kept short for fd names and file
// names; a netdev id may be longer.
const (
	maxID     = 32
	maxNetdev = 64
)

// CheckID says whether id can be a NIC id.
func CheckID(id string) error {
	if !IsQEMUID(id, maxID) {
		return fmt.Errorf("id %.64q: use a letter, then up to 31 letters, digits, '-', '.' or '_' (QEMU's id rule): %w", id, ErrInvalid)
	}
	return nil
}

// MaxVMName bounds a VM name.
const MaxVMName = 128

// CheckVMName says whether name can be a VM name in a record ("" is
// allowed: a VM without -name, known by its socket).
func CheckVMName(name string) error {
	if len(name) > MaxVMName {
		return fmt.Errorf("VM name of %d bytes (at most %d): %w", len(name), MaxVMName, ErrInvalid)
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("VM name %.64q has a control character: %w", name, ErrInvalid)
		}
	}
	return nil
}

func checkLink(what string, l *Link) error {
	if l == nil {
		return nil
	}
	if !isIfname(l.Name) || l.Name == "." || l.Name == ".." {
		return fmt.Errorf("%s name %.32q is not an interface name: %w", what, l.Name, ErrInvalid)
	}
	if l.Ifindex < 0 {
		return fmt.Errorf("%s ifindex %d: %w", what, l.Ifindex, ErrInvalid)
	}
	if l.Lower != "" && !isIfname(l.Lower) {
		return fmt.Errorf("%s lower %.32q is not an interface name: %w", what, l.Lower, ErrInvalid)
	}
	return nil
}

// Validate checks a record; the error wraps ErrInvalid.
func (n *NIC) Validate() error {
	if n.Schema != Schema {
		return fmt.Errorf("schema %.40q, want %q: %w", n.Schema, Schema, ErrInvalid)
	}
	if err := CheckVMName(n.VM); err != nil {
		return err
	}
	if err := CheckID(n.ID); err != nil {
		return err
	}
	if !IsQEMUID(n.Netdev, maxNetdev) {
		return fmt.Errorf("netdev id %.64q is not a QEMU id: %w", n.Netdev, ErrInvalid)
	}
	if n.Libvirt != nil {
		if !IsUUID(n.Libvirt.UUID) {
			return fmt.Errorf("libvirt domain uuid %.64q is not a canonical UUID: %w", n.Libvirt.UUID, ErrInvalid)
		}
		if len(n.Libvirt.URI) > 4096 || len(n.Libvirt.Alias) > 64 {
			return fmt.Errorf("libvirt uri or alias too long: %w", ErrInvalid)
		}
		if n.QEMUPID < 0 || n.QEMUPID > 1<<22 || len(n.QMP) > 4096 {
			return fmt.Errorf("qemu_pid %d or qmp out of range: %w", n.QEMUPID, ErrInvalid)
		}
	} else {
		if n.QEMUPID <= 0 || n.QEMUPID > 1<<22 {
			return fmt.Errorf("qemu_pid %d out of range: %w", n.QEMUPID, ErrInvalid)
		}
		if n.QMP == "" || len(n.QMP) > 4096 {
			return fmt.Errorf("qmp socket path empty or over 4096 bytes: %w", ErrInvalid)
		}
	}
	switch n.Backend {
	case "vdpa", "vhost-net", "userspace":
	default:
		return fmt.Errorf("backend %.32q: want vdpa, vhost-net or userspace: %w", n.Backend, ErrInvalid)
	}
	if n.Queues < 1 || n.Queues > 256 {
		return fmt.Errorf("queues %d: want 1 to 256: %w", n.Queues, ErrInvalid)
	}
	if hw, err := net.ParseMAC(n.MAC); err != nil || len(hw) != 6 {
		return fmt.Errorf("mac %.32q is not an Ethernet address: %w", n.MAC, ErrInvalid)
	}
	if n.MTU != 0 && (n.MTU < 68 || n.MTU > 65535) {
		return fmt.Errorf("mtu %d: want 68 to 65535: %w", n.MTU, ErrInvalid)
	}
	if err := checkLink("tap", n.Tap); err != nil {
		return err
	}
	if err := checkLink("macvtap", n.Macvtap); err != nil {
		return err
	}
	if n.Tap != nil && n.Macvtap != nil {
		return fmt.Errorf("both a tap and a macvtap: %w", ErrInvalid)
	}
	if n.VDPA != nil && (n.VDPA.Name == "" || len(n.VDPA.Name) > 64) {
		return fmt.Errorf("vdpa device name empty or over 64 bytes: %w", ErrInvalid)
	}
	if len(n.FDNames) > 2*256+1 {
		return fmt.Errorf("%d fd names: %w", len(n.FDNames), ErrInvalid)
	}
	for _, f := range n.FDSets {
		if f < 0 {
			return fmt.Errorf("fdset %d: %w", f, ErrInvalid)
		}
	}
	switch n.Status {
	case StatusAttaching, StatusAttached, StatusDetaching, StatusDetachTimeout:
	default:
		return fmt.Errorf("status %.32q: want attaching, attached, detaching or detach-timeout: %w", n.Status, ErrInvalid)
	}
	return nil
}

// Parse decodes and validates a record read from outside: at most
// MaxRecordSize bytes, no unknown fields, nothing after the object.
func Parse(b []byte) (*NIC, error) {
	if len(b) > MaxRecordSize {
		return nil, fmt.Errorf("%d bytes (at most %d): %w", len(b), MaxRecordSize, ErrInvalid)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	var n NIC
	if err := d.Decode(&n); err != nil {
		return nil, fmt.Errorf("not a NIC record: %v: %w", err, ErrInvalid)
	}
	if d.More() {
		return nil, fmt.Errorf("data after the record: %w", ErrInvalid)
	}
	if err := n.Validate(); err != nil {
		return nil, err
	}
	return &n, nil
}
