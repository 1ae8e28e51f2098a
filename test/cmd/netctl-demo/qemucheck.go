package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/netctl/netctl/qmp"
)

// qemuNothingLeft shows QEMU's network backends and NICs (HMP info
// network) and its fd sets, and fails if any still names the NIC id or
// its netdev (netctl-ID).
func qemuNothingLeft(ctx context.Context, n *narrator, c *qmp.Client, id string) error {
	var info string
	if err := c.Run(ctx, "human-monitor-command", map[string]string{"command-line": "info network"}, &info); err != nil {
		return fmt.Errorf("QMP info network: %w", err)
	}
	if strings.TrimSpace(info) == "" {
		info = "(no network backends, no NICs)"
	}
	n.shown("(qemu)", "info network", info)
	if strings.Contains(info, id+":") || strings.Contains(info, "netctl-"+id) {
		return fmt.Errorf("QEMU still has %s or its netdev", id)
	}
	raw, err := c.Execute(ctx, "query-fdsets", nil)
	if err != nil {
		return fmt.Errorf("QMP query-fdsets: %w", err)
	}
	n.shown("(qmp)", `{"execute": "query-fdsets"}`, string(raw))
	var sets []json.RawMessage
	if err := json.Unmarshal(raw, &sets); err != nil || len(sets) != 0 {
		return fmt.Errorf("QEMU still has fd sets: %s", raw)
	}
	return nil
}

// qmpShow runs one QMP command, shown as its JSON, with QEMU's answer.
func qmpShow(ctx context.Context, n *narrator, c *qmp.Client, cmd string) error {
	raw, err := c.Execute(ctx, cmd, nil)
	if err != nil {
		n.shown("(qmp)", fmt.Sprintf(`{"execute": %q}`, cmd), err.Error())
		return fmt.Errorf("QMP %s: %w", cmd, err)
	}
	n.shown("(qmp)", fmt.Sprintf(`{"execute": %q}`, cmd), string(raw))
	return nil
}
