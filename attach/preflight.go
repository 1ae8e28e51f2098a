package attach

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/netctl/netctl/hostnic"
	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/policy/host"
	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/state"
)

// Preflight checks, creating and changing nothing, that every request
// of rs (all for the QEMU at one socket) could be attached now, as a
// whole: each request as Attach checks it, each id free in netctl's
// records and in QEMU, no MAC, slot or tap named twice, each slot free
// on QEMU's root bus, each tap present, and each backend decision
// (with Require and Pool) made on this host. netctl migrate incoming
// runs it before the first NIC is added to a QEMU waiting for its guest,
// which cannot unplug (no guest answers): a refusal then leaves nothing.
// A vdpa device to create on a management device exists only once
// created: its decision is left to its attach.
func Preflight(ctx context.Context, rs []Request) error {
	ps := make([]*parsed, 0, len(rs))
	for _, r := range rs {
		p, err := r.check()
		if err != nil {
			return fmt.Errorf("NIC %s: %w", r.ID, err)
		}
		if len(ps) > 0 && p.QMP != ps[0].QMP {
			return fmt.Errorf("attach: preflight of NICs for two QMP sockets (%s, %s): %w", ps[0].QMP, p.QMP, ErrInvalid)
		}
		ps = append(ps, p)
	}
	if len(ps) == 0 {
		return nil
	}
	twice := map[string]string{}
	for _, p := range ps {
		vdpaKey := ""
		if p.VDPA != "" {
			vdpaKey = "vdpa device " + p.VDPA
		}
		for _, k := range []string{"id " + p.ID, "MAC " + p.mac.String(), slotKey(p), tapKey(p), vdpaKey} {
			if k == "" {
				continue
			}
			if other, ok := twice[k]; ok {
				return fmt.Errorf("NICs %s and %s have the same %s: %w", other, p.ID, k, ErrConflict)
			}
			twice[k] = p.ID
		}
	}
	for _, p := range ps {
		if p.Mgmtdev != "" {
			if name := hostnic.VDPAName(p.ID); p.Host.VDPAExists(name) {
				return fmt.Errorf("NIC %s: netctl creates its vdpa device as %s, and a vdpa device of that name exists here (vdpa dev show %s; on one host, the source's): %w",
					p.ID, name, name, ErrConflict)
			}
		}
		if p.mvLower != "" && p.mvMode != macvtap.ModePassthru {
			if err := macInUseOn(p.mvLower, p.mac); err != nil {
				return fmt.Errorf("NIC %s: %w", p.ID, err)
			}
		}
		if p.Tap != "" {
			if _, err := net.InterfaceByName(p.Tap); err != nil {
				return fmt.Errorf("NIC %s: tap %s is not on this host (%v): create it as on the source (ip tuntap add %s mode tap multi_queue), or leave it to netctl: %w",
					p.ID, p.Tap, err, p.Tap, ErrNotAvailable)
			}
			if err := macvtap.CheckTap(p.Tap, p.Queues, true, !p.SharedTap); err != nil {
				return fmt.Errorf("NIC %s: %w", p.ID, err)
			}
		}
	}
	store, err := state.Open(ps[0].StateDir)
	if err != nil {
		return step("state", err)
	}
	c, err := dialQMP(ctx, ps[0].QMP)
	if err != nil {
		return step("connect to QEMU", err)
	}
	q, err := readQEMU(ctx, c)
	var used map[string]string
	if err == nil {
		used, err = rootSlots(ctx, c)
	}
	if err == nil {
		// The root ports the NICs name: whether each is free.
		var ports []string
		for _, p := range ps {
			if rootPortTypes[q.Types[p.Bus]] && !slices.Contains(ports, p.Bus) {
				ports = append(ports, p.Bus)
			}
		}
		q.FreePorts, err = freePorts(ctx, c, ports, false)
	}
	c.Close()
	if err != nil {
		return step("read QEMU", err)
	}
	var desc *host.Description
	onPort := map[string]string{} // root port slot ("rp1 0x0") -> the NIC that goes there
	for _, p := range ps {
		vm := p.VMName
		if vm == "" {
			vm = q.Name
		}
		if n, err := store.Load(state.KeyFor(vm, p.QMP), p.ID); err != nil || n.Status != state.StatusAttaching {
			// An interrupted attach's record is its own attach's to undo.
			if err := checkFree(store, state.KeyFor(vm, p.QMP), p.ID, q); err != nil {
				return fmt.Errorf("NIC %s: %w", p.ID, err)
			}
		}
		switch {
		case p.Bus == "", p.Bus == "pci.0", p.Bus == "pcie.0":
		case !q.Devices[p.Bus]:
			return fmt.Errorf("NIC %s: QEMU has no bus %s (the source's): start the destination QEMU with the source's devices (-device pcie-root-port,id=%s,...): %w",
				p.ID, p.Bus, p.Bus, ErrNotAvailable)
		case rootPortTypes[q.Types[p.Bus]] && !slices.Contains(q.FreePorts, p.Bus):
			return fmt.Errorf("NIC %s: root port %s holds a device already: start the destination QEMU with the source's devices on the source's ports: %w",
				p.ID, p.Bus, ErrConflict)
		}
		if rootPortTypes[q.Types[p.Bus]] {
			// A root port has one slot, 0x0 (no addr: that one too);
			// slotKey's check above did not know the bus's type.
			k := p.Bus + " " + cmp.Or(strings.TrimSuffix(p.Addr, ".0"), "0x0")
			if other, ok := onPort[k]; ok {
				return fmt.Errorf("NICs %s and %s both go on root port %s, which takes one device: give each NIC a port of its own: %w", other, p.ID, p.Bus, ErrConflict)
			}
			onPort[k] = p.ID
		}
		if p.Bus == "" && p.Addr != "" && !strings.Contains(q.Machine, "q35") {
			if id, ok := used[strings.TrimSuffix(p.Addr, ".0")]; ok {
				return fmt.Errorf("NIC %s: slot %s of QEMU's root bus holds device %s: start the destination QEMU with the source's devices at the source's slots: %w",
					p.ID, p.Addr, firstNonEmpty(id, "(no id)"), ErrConflict)
			}
		}
		if p.Mgmtdev != "" {
			continue
		}
		if desc == nil {
			probe := p.Probe
			if probe == nil {
				probe = func(ctx context.Context) (*host.Description, error) { return p.Host.Probe(ctx, probeSpec) }
			}
			if desc, err = probe(ctx); err != nil {
				return step("probe the host", err)
			}
		}
		d := *desc
		d.QEMU.Version, d.QEMU.Error = q.Version, ""
		restrictVDPA(&d, p)
		if _, err := policy.Decide(&d, policy.Request{Backend: p.Backend, Queues: p.Queues, Profile: p.Profile, QEMU: q.Version, Pool: p.Pool, Enable: p.Require}); err != nil {
			return fmt.Errorf("NIC %s: %w", p.ID, step("choose the backend", err))
		}
	}
	return nil
}

// slotKey names p's PCI slot for the duplicate check ("" for QEMU's
// choice).
func slotKey(p *parsed) string {
	if p.Addr == "" {
		return ""
	}
	return "slot " + p.Bus + ":" + strings.TrimSuffix(p.Addr, ".0")
}

func tapKey(p *parsed) string {
	if p.Tap == "" || p.SharedTap {
		return ""
	}
	return "tap " + p.Tap
}

// rootSlots is what query-pci says sits on QEMU's root bus (bus 0):
// addr= ("0x3", "0x3.1") -> the device's id.
func rootSlots(ctx context.Context, c *qmp.Client) (map[string]string, error) {
	var buses []struct {
		Bus     int `json:"bus"`
		Devices []struct {
			Slot     int    `json:"slot"`
			Function int    `json:"function"`
			QdevID   string `json:"qdev_id"`
		} `json:"devices"`
	}
	if err := c.Run(ctx, "query-pci", nil, &buses); err != nil {
		return nil, fmt.Errorf("query-pci: %w", err)
	}
	used := map[string]string{}
	for _, b := range buses {
		if b.Bus != 0 || len(b.Devices) > maxIDs {
			continue
		}
		for _, d := range b.Devices {
			a := fmt.Sprintf("0x%x", d.Slot)
			if d.Function > 0 {
				a += fmt.Sprintf(".%d", d.Function)
			}
			used[a] = d.QdevID
		}
	}
	return used, nil
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// macInUseOn refuses a MAC that a macvlan or macvtap up on lower already
// has: the kernel refuses a second one up with it (EADDRINUSE). On one
// host that is the migration's source's own macvtap.
func macInUseOn(lower string, mac net.HardwareAddr) error {
	low, err := netlink.LinkByName(lower)
	if err != nil {
		return nil // attach says what is missing
	}
	links, err := netlink.LinkList()
	if err != nil {
		return nil
	}
	for _, l := range links {
		a := l.Attrs()
		if a.ParentIndex != low.Attrs().Index || (l.Type() != "macvtap" && l.Type() != "macvlan") || a.Flags&net.FlagUp == 0 || a.HardwareAddr.String() != mac.String() {
			continue
		}
		return fmt.Errorf("%s %s on %s has MAC %s already (on one host: the migration's source's), and the kernel takes a MAC once per lower device: "+
			"a macvtap NIC migrates to another host, or between QEMUs on this one only with a tap: %w", l.Type(), a.Name, lower, mac, ErrConflict)
	}
	return nil
}
