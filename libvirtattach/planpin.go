package libvirtattach

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"libvirt.org/go/libvirtxml"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/libvirtdom"
	"github.com/netctl/netctl/policy"
)

// hotplugKeepsPlan refuses a hotplug that cannot hold the pool's plan:
// a bit the plan leaves out whose QEMU property libvirt sets only
// through <qemu:override> (queue_reset, the USO bits), which applies
// when QEMU starts, never to a hotplugged device (libvirt's
// qemuBuildDeviceCommandlineHandleOverrides runs only for the command
// line), so QEMU would offer it, the guest would negotiate it, and a
// migration to a host of the pool without it would fail at its end. A
// machine type that turns the bit off itself (policy.MachineOff) holds
// the plan. nil when the hotplug keeps the plan.
func hotplugKeepsPlan(dec policy.Decision, dom *libvirtxml.Domain, pool *policy.Pool) error {
	if pool == nil {
		return nil
	}
	machine := ""
	if dom.OS != nil && dom.OS.Type != nil {
		machine = dom.OS.Type.Machine
	}
	byMachine := policy.MachineOff(machine)
	ov := libvirtdom.DriverFor(nil, dec, 0).Override
	var bad []string
	for _, p := range slices.Sorted(maps.Keys(ov)) {
		f, ok := policy.PropFeature(p)
		if !ok || pool.Outside(f) == 0 || byMachine.Has(f) {
			continue
		}
		bad = append(bad, fmt.Sprintf("%s=%s (%s)", p, map[bool]string{true: "on", false: "off"}[ov[p]], f))
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("the pool's plan %s needs %s on this NIC, which libvirt sets only through <qemu:override> when QEMU starts, never on a hotplug, "+
		"and the domain's machine type %q does not turn it off: the guest would negotiate what hosts of the pool cannot carry, and a migration there would fail at its end. "+
		"Attach without --plan (the NIC is then not migration-safe across the pool), or add the NIC to the domain's definition and let netctl hook pin "+
		"write the override before the next start: %w", pool.ID, strings.Join(bad, ", "), machine, errs.ErrNotAvailable)
}
