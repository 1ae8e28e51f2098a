package stats

import (
	"strconv"
	"time"

	"github.com/netctl/netctl/internal/errs"
)

// The shared sentinel errors (internal/errs), re-exported.
var (
	ErrInvalid      = errs.ErrInvalid
	ErrNotAvailable = errs.ErrNotAvailable
	ErrNotSupported = errs.ErrNotSupported
	ErrBusy         = errs.ErrBusy
)

// Source names: the keys of NICStats.Missing.
const (
	SourceLink  = "link"  // host tap/macvtap counters (rtnetlink)
	SourceRings = "rings" // virtqueue avail/used indices in QEMU's memory
	SourceVhost = "vhost" // vhost-net worker threads' CPU time
	SourceVDPA  = "vdpa"  // vdpa vendor statistics
	SourceQMP   = "qmp"   // the VM's QMP monitor
)

// BackendVhostUser is the backend of a NIC whose netdev is vhost-user:
// its rings are served by another process (a DPDK switch, netctl
// vhost-user); it has no vhost-net worker. (Extension of the agreed
// API: policy knows only the backends netctl attaches.)
const BackendVhostUser = "vhost-user"

// Target is one NIC to read.
type Target struct {
	VM, NIC string // VM name, QOM device id
	Netdev  string
	QMP     string // monitor socket path ("" if none can be reached: ring and worker sources then say why)
	PID     int    // QEMU's pid
	// PIDStart is field 22 of /proc/PID/stat of QEMU (0 = unknown): with
	// PID it tells a reused pid from QEMU. (Extension of the agreed API.)
	PIDStart uint64
	Backend  string // policy.BackendVhostNet, BackendVDPA, BackendUserspace, or BackendVhostUser
	// NetdevType is QEMU's netdev type ("tap", "vhost-user", "vhost-vdpa",
	// "user", ...; "" unknown). It decides which QMP queries are safe for
	// the rings (see readRings). (Extension of the agreed API.)
	NetdevType string
	Link       string // host tap/macvtap ("" for vdpa)
	Ifindex    int
	VDPA       string // vdpa device name
	QueuePairs int
	// Attached is when netctl attached the NIC (its record; zero for a
	// NIC found over QMP). With several vhost-net NICs in one QEMU, vhost
	// workers are attributed in this order. (Extension of the agreed API.)
	Attached time.Time
	// Libvirt: the NIC is a libvirt domain's (its monitor is libvirt's):
	// read through libvirt's API (see Options.LibvirtMonitor). (Extension
	// of the agreed API.)
	Libvirt *LibvirtTarget
	// UUID is the VM's UUID, lower case (QMP query-uuid; a libvirt
	// domain's own): "" when QEMU has none (its default, all zero) or it
	// is not known yet. Collect fills it in the NICStats' Target. A NIC's
	// ring counts belong to its VM (UUID, name, NIC id), not to one QEMU
	// process: see Collector. (Extension of the agreed API.)
	UUID string
}

// qomID is the NIC's device id in QEMU: a libvirt interface's alias.
func (t Target) qomID() string {
	if t.Libvirt != nil && t.Libvirt.Alias != "" {
		return t.Libvirt.Alias
	}
	return t.NIC
}

// Key identifies a target across collections (VM, QEMU's pid and start
// time, NIC, when netctl attached it): a QEMU restarted under a reused
// pid, or a NIC detached and attached again under the same id, is
// another target.
func (t Target) Key() string {
	attached := "0"
	if !t.Attached.IsZero() {
		attached = strconv.FormatInt(t.Attached.UnixNano(), 10)
	}
	return t.VM + "\x00" + t.QMP + "\x00" + strconv.Itoa(t.PID) + "\x00" + strconv.FormatUint(t.PIDStart, 10) + "\x00" + t.NIC + "\x00" + attached
}

// Counters are one direction's counters.
type Counters struct{ Packets, Bytes, Errors, Drops uint64 }

// LinkStats are the host link's counters, named from the GUEST's side:
// RX is what the guest received, TX what it sent. For a tap that is the
// tap's tx and rx, flipped; a macvtap counts from the guest's side
// already (its tx is what the guest sent), so its counters are not.
type LinkStats struct{ RX, TX Counters }

// QueueStats are one virtqueue's indices.
type QueueStats struct {
	Pair      int
	Direction string // "rx" or "tx", guest side (vq 2*Pair is rx, 2*Pair+1 tx)
	Offered   uint64 // descriptors the driver made available (avail idx), accumulated across 16-bit wraps
	Completed uint64 // descriptors the device used (used idx), accumulated
	// Offered and Completed start at 0 when netctl first reads the ring
	// (not at the raw index); AvailIdx and UsedIdx are the raw 16-bit
	// indices of the last read. (Extension of the agreed API.)
	AvailIdx, UsedIdx uint16
	// Uncounted: steps of the indices not counted because they could not
	// be told from a step back (more than half the 16-bit range between
	// two reads: a loadvm or snapshot revert, a reset unseen). Each one
	// may hide up to half a turn of traffic. (Extension of the agreed API.)
	Uncounted uint64
}

// WorkerStats is a vhost-net worker thread (one per queue pair, one per
// /dev/vhost-net fd) and the CPU time it has used.
type WorkerStats struct {
	Pair       int
	TID        int
	Comm       string
	CPUSeconds float64
}

// VDPAQueueStats are one vdpa queue's vendor statistics.
type VDPAQueueStats struct {
	Queue                       int
	Type                        string // "rx", "tx" or "control_vq"
	ReceivedDesc, CompletedDesc uint64
}

// NICStats is one sample of one NIC.
type NICStats struct {
	Target Target
	Time   time.Time // when the NIC's sample was done (every source read)
	// When each source was read (zero: not read): Rate takes each
	// source's interval from its own times. (Extension of the agreed API.)
	LinkTime, RingsTime, WorkersTime, VDPATime time.Time
	Link                                       *LinkStats
	Queues                                     []QueueStats
	Workers                                    []WorkerStats
	VDPA                                       []VDPAQueueStats
	// Missing: source ("link", "rings", "vhost", "vdpa", "qmp") -> why that
	// source gave nothing ("not provided by this driver", "monitor busy:
	// held by pid N (libvirtd)", "VM gone").
	Missing map[string]string
	// LinkFrom is "libvirt" when Link came from libvirt's interface
	// counters (virDomainInterfaceStats: the tap is not on this host);
	// "" when from the link itself. (Extension of the agreed API.)
	LinkFrom string
	// Tainted: QEMU was asked through libvirt's monitor passthrough in
	// this collection (Options.LibvirtMonitor): libvirt has marked the
	// domain "tainted: custom-monitor". (Extension of the agreed API.)
	Tainted bool
}

func (s *NICStats) missing(source, why string) {
	if s.Missing == nil {
		s.Missing = map[string]string{}
	}
	s.Missing[source] = why
}
