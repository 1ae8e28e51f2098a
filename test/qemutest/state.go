package qemutest

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/netctl/netctl/qmp"
)

// State is what a QEMU holds that a NIC's attach could leave behind,
// read over QMP: for "nothing left" checks after a detach or a failed
// attach.
type State struct {
	// Devices are the user-created devices (qom-list /machine/peripheral),
	// by id, sorted.
	Devices []string
	// Network is HMP's "info network": every netdev and NIC client.
	Network string
	// FDSets are query-fdsets' sets, as QEMU returned them.
	FDSets []json.RawMessage
}

// Read dials QEMU's QMP socket sock, reads its State and hangs up (QEMU's
// monitor takes one client at a time: the code under test needs it next).
func Read(ctx context.Context, t testing.TB, sock string) *State {
	t.Helper()
	c, err := qmp.Dial(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := ReadState(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// ReadState asks QEMU over c.
func ReadState(ctx context.Context, c *qmp.Client) (*State, error) {
	var s State
	var props []struct{ Name, Type string }
	if err := c.Run(ctx, "qom-list", map[string]string{"path": "/machine/peripheral"}, &props); err != nil {
		return nil, fmt.Errorf("qemutest: qom-list /machine/peripheral: %w", err)
	}
	for _, p := range props {
		if strings.HasPrefix(p.Type, "child<") {
			s.Devices = append(s.Devices, p.Name)
		}
	}
	sort.Strings(s.Devices)
	if err := c.Run(ctx, "human-monitor-command", map[string]string{"command-line": "info network"}, &s.Network); err != nil {
		return nil, fmt.Errorf("qemutest: info network: %w", err)
	}
	if err := c.Run(ctx, "query-fdsets", nil, &s.FDSets); err != nil {
		return nil, fmt.Errorf("qemutest: query-fdsets: %w", err)
	}
	return &s, nil
}

// Holds says what of NIC id (device id, netdev netdev) QEMU still holds,
// or "" when nothing: the device, the netdev, any fdset.
func (s *State) Holds(id, netdev string) string {
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

// Clients lists the ids of the network clients in "info network" (each
// netdev and each NIC frontend: a line "ID: index=N,type=..."), sorted,
// each once.
func (s *State) Clients() []string {
	seen := map[string]bool{}
	var ids []string
	for _, l := range strings.Split(s.Network, "\n") {
		l = strings.TrimLeft(strings.TrimSuffix(l, "\r"), ` \`)
		id, rest, ok := strings.Cut(l, ": ")
		if ok && id != "" && strings.HasPrefix(rest, "index=") && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}
