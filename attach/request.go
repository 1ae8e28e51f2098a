package attach

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/internal/lazyre"
	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/policy/host"
	"github.com/netctl/netctl/state"
	"github.com/netctl/netctl/virtio"
)

// The sentinel errors attach wraps (the same values as every netctl
// package's).
var (
	ErrInvalid      = errs.ErrInvalid      // bad input; nothing changed (CLI exit 2)
	ErrNotAvailable = errs.ErrNotAvailable // the backend asked for is not here
	ErrConflict     = errs.ErrConflict     // the id is in use in QEMU or in netctl's records
	ErrBusy         = errs.ErrBusy         // a device is held by another process
	ErrNotSupported = errs.ErrNotSupported // the VM cannot use the backend as it is (a VDUSE device without shared RAM)
	// ErrTimeout: the guest did not release the NIC before the deadline;
	// the record says detach-timeout.
	ErrTimeout = fmt.Errorf("unplug timed out")
)

// Request is what to attach.
type Request struct {
	QMP     string // the QMP socket (a unix socket path)
	VMName  string // the VM's name; "" takes QEMU's own (query-name)
	ID      string // the device id; the netdev is "netctl-"+ID
	Backend string // auto (""), vdpa, vhost-net or userspace
	// At most one of Tap, Macvtap, VDPA, Mgmtdev.
	Tap string // an existing tap to open (never deleted)
	// SharedTap lets Tap be a multiqueue tap on which another process
	// (another VM) already has queues: the two then share the tap, and
	// MTU changes both. Without it such a tap is refused (ErrBusy).
	SharedTap bool
	Macvtap   string // LOWER[:MODE]: create a macvtap on LOWER (bridge by default)
	VDPA      string // an existing vdpa device bound to vhost_vdpa
	Mgmtdev   string // create a vdpa device on this management device
	Queues    int    // queue pairs, 1 to policy.MaxQueues (0: 1)
	MAC       string // the guest's MAC; "" picks a random 52:54:00:xx:xx:xx
	MTU       int    // 0: leave the backend's
	Profile   string // throughput (default), latency or compat
	// Pool pins the NIC to a pool's plan (policy.ParsePlanFile): the VM
	// is offered nothing every host of the pool cannot carry.
	Pool *policy.Pool
	// Bus is device_add's bus= (a pcie-root-port's id on q35); "" picks a
	// free pcie-root-port on q35 and leaves it to QEMU elsewhere.
	Bus string
	// Addr is device_add's addr= (the slot on Bus): a NIC re-created for
	// an incoming migration takes its source's slot; "" QEMU's choice.
	Addr string
	// Require are features the NIC must offer, or attach refuses before
	// it creates anything (an incoming migration: what the guest
	// negotiated on the source).
	Require virtio.Features

	StateDir string // the state root; "" is state.DefaultDir

	// QEMUPID and QEMUStart, when set, are the QEMU process that --vm
	// found (qemuproc.Find): the connection attach uses must be served by
	// it (SO_PEERCRED on that connection), or attach refuses before it
	// creates anything.
	QEMUPID   int
	QEMUStart uint64

	// Host is what attach does to the host; nil is RealHost.
	Host Host
	// Probe, when set, replaces Host.Probe (tests force a backend path).
	Probe func(ctx context.Context) (*host.Description, error)
	// ExtraProps are added to device_add last (tests: a value QEMU
	// refuses).
	ExtraProps map[string]any
	// Times, when set, receives how long each step took.
	Times *StepTimes
}

// DetachRequest is what to detach.
type DetachRequest struct {
	QMP      string
	VMName   string
	ID       string
	StateDir string
	// Timeout is how long to wait for DEVICE_DELETED (default 30 s).
	Timeout time.Duration
	// Retry is how often device_del is sent again while waiting (default
	// 5 s, PCIe's pending-delete expiry).
	Retry time.Duration
	Host  Host
}

// ListRequest says which records to list.
type ListRequest struct {
	VMName   string // "" for every VM
	StateDir string
	// CheckTimeout bounds the check of each VM against QEMU (default 2 s).
	CheckTimeout time.Duration
	Host         Host // nil: RealHost
	// Unreadable, when set, gets the error of each record file that
	// could not be read (it names the file); List skips those records.
	Unreadable func(error)
}

// Listed is one record and what QEMU says about it now.
type Listed struct {
	*state.NIC
	// Present: "yes" (QEMU has the device), "gone" (QEMU exited or the
	// device is not there: run netctl gc, or netctl detach, to clean up), or "unknown"
	// (QEMU could not be asked; Check says why).
	Present string `json:"present"`
	Check   string `json:"check,omitempty"`
	// Link: "present" or "missing" for the NIC's tap or macvtap (same
	// name and ifindex as recorded, in this network namespace); "" for
	// vDPA.
	Link string `json:"link,omitempty"`
}

// parsed is a checked Request.
type parsed struct {
	Request
	mac     net.HardwareAddr
	mvLower string
	mvMode  macvtap.Mode
}

func (r Request) check() (*parsed, error) {
	p := &parsed{Request: r}
	if r.QMP == "" {
		return nil, fmt.Errorf("attach: no QMP socket: name it (--qmp SOCKET) or the VM (--vm NAME): %w", ErrInvalid)
	}
	abs, err := filepath.Abs(r.QMP)
	if err != nil {
		return nil, fmt.Errorf("attach: QMP socket %s: %w", r.QMP, err)
	}
	p.QMP = abs // one spelling per socket: the lock and the records are keyed by it
	if err := state.CheckID(r.ID); err != nil {
		return nil, fmt.Errorf("attach: %w", err)
	}
	if err := state.CheckVMName(r.VMName); err != nil {
		return nil, fmt.Errorf("attach: %w", err)
	}
	switch r.Backend {
	case "", "auto", policy.BackendVDPA, policy.BackendVhostNet, policy.BackendUserspace:
	default:
		return nil, fmt.Errorf("attach: backend %.32q: use auto, vdpa, vhost-net or userspace: %w", r.Backend, ErrInvalid)
	}
	n := 0
	for _, s := range []string{r.Tap, r.Macvtap, r.VDPA, r.Mgmtdev} {
		if s != "" {
			n++
		}
	}
	if n > 1 {
		return nil, fmt.Errorf("attach: give at most one of --tap, --macvtap, --vdpa and --mgmtdev: %w", ErrInvalid)
	}
	if (r.Tap != "" || r.Macvtap != "") && r.Backend == policy.BackendVDPA {
		return nil, fmt.Errorf("attach: --backend vdpa takes --vdpa or --mgmtdev, not a tap or macvtap: %w", ErrInvalid)
	}
	if (r.VDPA != "" || r.Mgmtdev != "") && (r.Backend == policy.BackendVhostNet || r.Backend == policy.BackendUserspace) {
		return nil, fmt.Errorf("attach: --vdpa and --mgmtdev need --backend vdpa or auto: %w", ErrInvalid)
	}
	if r.Bus != "" && !state.IsQEMUID(r.Bus, 64) {
		return nil, fmt.Errorf("attach: --bus %.32q is not a QEMU bus id: %w", r.Bus, ErrInvalid)
	}
	if r.Addr != "" && !addrPattern.MatchString(r.Addr) {
		return nil, fmt.Errorf("attach: addr %.32q is not a PCI slot (0x1f, or 0x1f.0): %w", r.Addr, ErrInvalid)
	}
	if r.Tap != "" && (len(r.Tap) > 15 || strings.ContainsAny(r.Tap, "/ %:")) {
		return nil, fmt.Errorf("attach: --tap %.32q is not an interface name: %w", r.Tap, ErrInvalid)
	}
	if r.Queues == 0 {
		p.Queues = 1
	}
	if p.Queues < 1 || p.Queues > policy.MaxQueues {
		return nil, fmt.Errorf("attach: %d queues: use 1 to %d: %w", r.Queues, policy.MaxQueues, ErrInvalid)
	}
	if r.MTU != 0 && (r.MTU < 68 || r.MTU > 65521) {
		return nil, fmt.Errorf("attach: MTU %d: use 68 to 65521: %w", r.MTU, ErrInvalid)
	}
	switch r.Profile {
	case "", policy.Throughput, policy.Latency, policy.Compat:
	default:
		return nil, fmt.Errorf("attach: profile %.32q: use throughput, latency or compat: %w", r.Profile, ErrInvalid)
	}
	if r.MAC == "" {
		p.mac = randomMAC()
	} else {
		hw, err := net.ParseMAC(r.MAC)
		if err != nil || len(hw) != 6 {
			return nil, fmt.Errorf("attach: MAC %.32q: want six hex bytes like 52:54:00:12:34:56: %w", r.MAC, ErrInvalid)
		}
		if hw[0]&1 != 0 {
			return nil, fmt.Errorf("attach: MAC %s is a multicast address: a NIC needs a unicast one (first byte even): %w", hw, ErrInvalid)
		}
		p.mac = hw
	}
	if r.Macvtap != "" {
		lower, mode, _ := strings.Cut(r.Macvtap, ":")
		if lower == "" || len(lower) > 15 {
			return nil, fmt.Errorf("attach: --macvtap %.32q: want LOWER[:MODE]: %w", r.Macvtap, ErrInvalid)
		}
		p.mvLower, p.mvMode = lower, macvtap.ModeBridge
		if mode != "" {
			m, err := macvtap.ParseMode(mode)
			if err != nil {
				return nil, fmt.Errorf("attach: --macvtap %s: %w", r.Macvtap, err)
			}
			p.mvMode = m
		}
	}
	if p.Host == nil {
		dir := p.StateDir
		if dir == "" {
			dir = state.DefaultDir
		}
		p.Host = RealHost{CacheDir: dir}
	}
	return p, nil
}

var addrPattern = lazyre.New(`^0x(1[0-9a-f]|[0-9a-f])(\.[0-7])?$`)

// NetdevID is the netdev id attach gives a NIC with device id id.
func NetdevID(id string) string { return "netctl-" + id }
