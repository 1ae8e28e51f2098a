package l2

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/qmp"
)

// rawNIC is one NIC hotplugged with raw QMP, the way libvirt does it:
// getfd for every fd on one connection, netdev_add naming them, then
// device_add.
type rawNIC struct {
	ID       string // device id; the netdev is "nd-"+ID
	MAC      net.HardwareAddr
	Bus      string // device_add bus= ("rp0" on q35), or empty
	TapFDs   []int  // type tap: one per queue
	VhostFDs []int  // with TapFDs: one /dev/vhost-net per queue pair (vhost=on, vhostforce=on)
	VDPAFD   int    // type vhost-vdpa when > 0: the /dev/vhost-vdpa-N fd
	Props    string // more device_add properties: "iommu_platform=on,mrg_rxbuf=off"
}

func (n rawNIC) netdev() string { return "nd-" + n.ID }

// fdNames passes fds under names that start with a letter (a name that
// starts with a digit is taken as an fd number by netdev_add).
func sendFDs(ctx context.Context, t *testing.T, c *qmp.Client, prefix string, fds []int) string {
	t.Helper()
	var names []string
	for i, fd := range fds {
		name := fmt.Sprintf("%s%d", prefix, i)
		if err := c.SendFD(ctx, name, fd); err != nil {
			t.Fatalf("getfd %s: %v", name, err)
		}
		names = append(names, name)
	}
	return strings.Join(names, ":")
}

// hotplug adds n's netdev and device and checks QEMU has both; the
// netdev is deleted again if device_add fails.
func hotplug(ctx context.Context, t *testing.T, c *qmp.Client, n rawNIC) {
	t.Helper()
	nd := map[string]any{"id": n.netdev()}
	switch {
	case n.VDPAFD > 0:
		nd["type"] = "vhost-vdpa"
		nd["vhostfd"] = sendFDs(ctx, t, c, "vdpa-"+n.ID+"-", []int{n.VDPAFD})
	default:
		nd["type"] = "tap"
		nd["fds"] = sendFDs(ctx, t, c, "tap-"+n.ID+"-", n.TapFDs)
		if len(n.VhostFDs) > 0 {
			nd["vhostfds"] = sendFDs(ctx, t, c, "vhost-"+n.ID+"-", n.VhostFDs)
			nd["vhost"] = true
			nd["vhostforce"] = true
		}
	}
	if _, err := c.Execute(ctx, "netdev_add", nd); err != nil {
		t.Fatalf("netdev_add %v: %v", nd, err)
	}
	if info := hmp(ctx, t, c, "info network"); !strings.Contains(info, n.netdev()+":") {
		t.Fatalf("after netdev_add, info network lists no %s:\n%s", n.netdev(), info)
	}
	dev := map[string]any{"driver": "virtio-net-pci", "id": n.ID, "netdev": n.netdev(), "mac": n.MAC.String()}
	if n.Bus != "" {
		dev["bus"] = n.Bus
	}
	if n.Props != "" {
		for _, kv := range strings.Split(n.Props, ",") {
			k, v, _ := strings.Cut(kv, "=")
			dev[k] = v
		}
	}
	if _, err := c.Execute(ctx, "device_add", dev); err != nil {
		if _, derr := c.Execute(ctx, "netdev_del", map[string]string{"id": n.netdev()}); derr != nil {
			t.Errorf("undo: netdev_del %s: %v", n.netdev(), derr)
		}
		t.Fatalf("device_add %v: %v", dev, err)
	}
	var kids []struct{ Name string }
	if err := c.Run(ctx, "qom-list", map[string]string{"path": "/machine/peripheral"}, &kids); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, k := range kids {
		found = found || k.Name == n.ID
	}
	if !found {
		t.Fatalf("after device_add, /machine/peripheral has no %s: %+v", n.ID, kids)
	}
}

// hmp runs a human monitor command.
func hmp(ctx context.Context, t *testing.T, c *qmp.Client, line string) string {
	t.Helper()
	var out string
	if err := c.Run(ctx, "human-monitor-command", map[string]string{"command-line": line}, &out); err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	return out
}

// waitStatus polls x-query-virtio-status of id until ok says yes.
func waitStatus(ctx context.Context, t *testing.T, c *qmp.Client, id string, timeout time.Duration, ok func(*VirtioStatus) bool) (*VirtioStatus, error) {
	t.Helper()
	dl := time.Now().Add(timeout)
	for {
		s, err := QueryVirtioStatus(ctx, c, id)
		if err != nil {
			return nil, err
		}
		if ok(s) {
			return s, nil
		}
		if time.Now().After(dl) {
			return s, fmt.Errorf("%s: not after %v; last status %s", id, timeout, s.Raw)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// unplug runs device_del and waits up to wait for DEVICE_DELETED (events
// come in while a command runs: it polls query-status). It reports
// whether the device went away.
func unplug(ctx context.Context, t *testing.T, c *qmp.Client, id string, wait time.Duration) (bool, time.Duration) {
	t.Helper()
	c.Events() // drop the old ones
	t0 := time.Now()
	if _, err := c.Execute(ctx, "device_del", map[string]string{"id": id}); err != nil {
		t.Fatalf("device_del %s: %v", id, err)
	}
	for time.Since(t0) < wait {
		if _, err := c.Execute(ctx, "query-status", nil); err != nil {
			t.Fatal(err)
		}
		for _, e := range c.Events() {
			var d struct {
				Device string `json:"device"`
			}
			if e.Event == "DEVICE_DELETED" && json.Unmarshal(e.Data, &d) == nil && d.Device == id {
				return true, time.Since(t0)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false, time.Since(t0)
}
