package guest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/test/qemutest"
)

// Raw QMP helpers for the host tests: what attach and detach do, written
// out by hand so that the fixture is proved without them.

// dialQMP connects to the guest's QMP socket.
func dialQMP(ctx context.Context, t *testing.T, g *Guest) *qmp.Client {
	t.Helper()
	c, err := qmp.Dial(ctx, g.QMP())
	if err != nil {
		t.Fatalf("QMP: %v", err)
	}
	return c
}

// hotplug passes fds (getfd, one name per queue), adds a tap netdev on
// them (vhost=off: this host has no vhost-net) and a virtio-net-pci NIC
// with mq=on and 2N+2 vectors for N > 1 queues. bus is "" on pc (the root
// bus) or a pcie-root-port's id on q35.
func hotplug(ctx context.Context, t *testing.T, c *qmp.Client, id string, fds []int, mac net.HardwareAddr, bus string) {
	t.Helper()
	var names []string
	for i, fd := range fds {
		name := fmt.Sprintf("%s-tap%d", id, i)
		if err := c.SendFD(ctx, name, fd); err != nil {
			t.Fatalf("getfd %s: %v", name, err)
		}
		names = append(names, name)
	}
	netdev := map[string]any{"type": "tap", "id": "host" + id, "vhost": false}
	if len(fds) == 1 {
		netdev["fd"] = names[0]
	} else {
		netdev["fds"] = strings.Join(names, ":")
	}
	if err := c.Run(ctx, "netdev_add", netdev, nil); err != nil {
		t.Fatalf("netdev_add %v: %v", netdev, err)
	}
	dev := map[string]any{"driver": "virtio-net-pci", "id": id, "netdev": "host" + id, "mac": mac.String()}
	if n := len(fds); n > 1 {
		dev["mq"] = true
		dev["vectors"] = 2*n + 2
	}
	if bus != "" {
		dev["bus"] = bus
	}
	if err := c.Run(ctx, "device_add", dev, nil); err != nil {
		t.Fatalf("device_add %v: %v", dev, err)
	}
}

// unplug asks for the NIC's removal, waits for DEVICE_DELETED (events
// arrive only while a command runs: query-status every 20 ms), then
// deletes the netdev. It returns how long DEVICE_DELETED took.
func unplug(ctx context.Context, t *testing.T, c *qmp.Client, id string) time.Duration {
	t.Helper()
	took, _, _ := unplugAndWait(ctx, t, c, id, false)
	return took
}

// unplugRepeating is unplug that also sends device_del again: at once,
// and once more when QEMU's pending-unplug window (5 s on PCIe) has passed
// with no DEVICE_DELETED yet. It returns how long DEVICE_DELETED took and
// QEMU's answers to the two repeats ("" for no error; late is "" too when
// DEVICE_DELETED came before 5 s).
func unplugRepeating(ctx context.Context, t *testing.T, c *qmp.Client, id string) (took time.Duration, early, late string) {
	t.Helper()
	return unplugAndWait(ctx, t, c, id, true)
}

// unplugAndWait is unplug, and with repeat unplugRepeating.
func unplugAndWait(ctx context.Context, t *testing.T, c *qmp.Client, id string, repeat bool) (took time.Duration, early, late string) {
	t.Helper()
	c.Events() // drop what came before
	del := func() string {
		if err := c.Run(ctx, "device_del", map[string]string{"id": id}, nil); err != nil {
			return err.Error()
		}
		return ""
	}
	t0 := time.Now()
	if e := del(); e != "" {
		t.Fatalf("device_del %s: %s", id, e)
	}
	if repeat {
		early = del()
	}
	lateSent := !repeat
	for {
		for _, e := range c.Events() {
			var d struct{ Device string }
			json.Unmarshal(e.Data, &d)
			if e.Event == "DEVICE_DELETED" && d.Device == id {
				took = time.Since(t0)
			}
		}
		if took != 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no DEVICE_DELETED for %s after %v", id, time.Since(t0))
		}
		if !lateSent && time.Since(t0) > 5050*time.Millisecond {
			late, lateSent = del(), true
			continue
		}
		time.Sleep(20 * time.Millisecond)
		if err := c.Run(ctx, "query-status", nil, nil); err != nil {
			t.Fatalf("query-status: %v", err)
		}
	}
	if err := c.Run(ctx, "netdev_del", map[string]string{"id": "host" + id}, nil); err != nil {
		t.Fatalf("netdev_del host%s: %v", id, err)
	}
	return took, early, late
}

// assertQEMUClean checks that QEMU holds nothing of the NIC id: no
// device, no netdev, no fdset (qemutest.ReadState), and no getfd name left
// (closefd of each fails).
func assertQEMUClean(ctx context.Context, t *testing.T, c *qmp.Client, id string, queues int) {
	t.Helper()
	s, err := qemutest.ReadState(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if left := s.Holds(id, "host"+id); left != "" {
		t.Errorf("QEMU still holds %s:\n%s", left, s.Network)
	}
	for i := 0; i < queues; i++ {
		if err := c.Run(ctx, "closefd", map[string]string{"fdname": fmt.Sprintf("%s-tap%d", id, i)}, nil); err == nil {
			t.Errorf("QEMU still held the getfd name %s-tap%d", id, i)
		}
	}
}

// assertQEMUHolds checks that qemutest.ReadState sees the NIC while it is
// plugged (so that assertQEMUClean's "nothing" means something).
func assertQEMUHolds(ctx context.Context, t *testing.T, c *qmp.Client, id string) {
	t.Helper()
	s, err := qemutest.ReadState(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if left := s.Holds(id, "host"+id); left != "device "+id+", netdev host"+id {
		t.Errorf("QEMU with NIC %s plugged holds %q:\n%s\ndevices %v", id, left, s.Network, s.Devices)
	}
}

// since logs and returns how long since t0.
func since(t *testing.T, what string, t0 time.Time) time.Duration {
	t.Helper()
	d := time.Since(t0)
	t.Logf("timing: %s: %v", what, d.Round(time.Millisecond))
	return d
}
