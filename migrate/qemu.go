package migrate

import (
	"context"
	"fmt"

	"github.com/netctl/netctl/qmp"
)

type vmInfo struct {
	name, version, machine, status string
}

// readVM asks QEMU its name, version, machine type and run state.
func readVM(ctx context.Context, c *qmp.Client) (vmInfo, error) {
	var q vmInfo
	v := c.Greeting.QMP.Version.QEMU
	q.version = fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Micro)
	var name struct {
		Name string `json:"name"`
	}
	if err := c.Run(ctx, "query-name", nil, &name); err != nil {
		return q, fmt.Errorf("query-name: %w", err)
	}
	q.name = name.Name
	if err := c.Run(ctx, "qom-get", map[string]string{"path": "/machine", "property": "type"}, &q.machine); err != nil {
		return q, fmt.Errorf("machine type (qom-get /machine type): %w", err)
	}
	var st struct {
		Status string `json:"status"`
	}
	if err := c.Run(ctx, "query-status", nil, &st); err != nil {
		return q, fmt.Errorf("query-status: %w", err)
	}
	q.status = st.Status
	return q, nil
}

// pciDevice is query-pci's device, with the bridges' buses below it.
type pciDevice struct {
	Slot     int    `json:"slot"`
	Function int    `json:"function"`
	QdevID   string `json:"qdev_id"`
	Bridge   *struct {
		Devices []pciDevice `json:"devices"`
	} `json:"pci_bridge"`
}

// pciSlot is device id's addr= ("0x3", or "0x3.1" for a function > 0).
func pciSlot(ctx context.Context, c *qmp.Client, id string) (string, error) {
	var buses []struct {
		Devices []pciDevice `json:"devices"`
	}
	if err := c.Run(ctx, "query-pci", nil, &buses); err != nil {
		return "", fmt.Errorf("query-pci: %w", err)
	}
	var find func(ds []pciDevice, depth int) (pciDevice, bool)
	find = func(ds []pciDevice, depth int) (pciDevice, bool) {
		if depth > 16 {
			return pciDevice{}, false
		}
		for _, d := range ds {
			if d.QdevID == id {
				return d, true
			}
			if d.Bridge != nil {
				if x, ok := find(d.Bridge.Devices, depth+1); ok {
					return x, true
				}
			}
		}
		return pciDevice{}, false
	}
	for _, b := range buses {
		if d, ok := find(b.Devices, 0); ok {
			if d.Slot < 0 || d.Slot > 31 || d.Function < 0 || d.Function > 7 {
				return "", fmt.Errorf("query-pci gives %s slot %d function %d: not a PCI address", id, d.Slot, d.Function)
			}
			if d.Function > 0 {
				return fmt.Sprintf("0x%x.%d", d.Slot, d.Function), nil
			}
			return fmt.Sprintf("0x%x", d.Slot), nil
		}
	}
	return "", fmt.Errorf("device %s: %w", id, errNoSlot)
}
