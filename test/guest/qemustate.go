package guest

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/netctl/netctl/qmp"
)

// QEMUState is what a QEMU holds that a NIC's attach could leave behind,
// read over QMP: for "nothing left" checks after a detach or a failed
// attach.
type QEMUState struct {
	// Devices are the user-created devices (qom-list /machine/peripheral),
	// by id, sorted.
	Devices []string
	// Network is HMP's "info network": every netdev and NIC client.
	Network string
	// FDSets are query-fdsets' sets, as QEMU returned them.
	FDSets []json.RawMessage
}

// ReadQEMUState asks QEMU over c.
func ReadQEMUState(ctx context.Context, c *qmp.Client) (*QEMUState, error) {
	var s QEMUState
	var props []struct{ Name, Type string }
	if err := c.Run(ctx, "qom-list", map[string]string{"path": "/machine/peripheral"}, &props); err != nil {
		return nil, fmt.Errorf("guest: qom-list /machine/peripheral: %w", err)
	}
	for _, p := range props {
		if strings.HasPrefix(p.Type, "child<") {
			s.Devices = append(s.Devices, p.Name)
		}
	}
	sort.Strings(s.Devices)
	if err := c.Run(ctx, "human-monitor-command", map[string]string{"command-line": "info network"}, &s.Network); err != nil {
		return nil, fmt.Errorf("guest: info network: %w", err)
	}
	if err := c.Run(ctx, "query-fdsets", nil, &s.FDSets); err != nil {
		return nil, fmt.Errorf("guest: query-fdsets: %w", err)
	}
	return &s, nil
}

// Holds says what of NIC id (device id, netdev netdev) QEMU still holds,
// or "" when nothing: the device, the netdev, any fdset.
func (s *QEMUState) Holds(id, netdev string) string {
	var left []string
	for _, d := range s.Devices {
		if d == id {
			left = append(left, "device "+id)
		}
	}
	for _, l := range strings.Split(s.Network, "\n") {
		// One line per queue: " \ hostnet1: index=0,type=tap,fd=..."
		if f := strings.Fields(strings.TrimLeft(l, " \\_")); len(f) > 0 && strings.TrimSuffix(f[0], ":") == netdev {
			left = append(left, "netdev "+netdev)
			break
		}
	}
	if len(s.FDSets) > 0 {
		left = append(left, fmt.Sprintf("%d fdset(s)", len(s.FDSets)))
	}
	return strings.Join(left, ", ")
}
