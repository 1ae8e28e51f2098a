package guest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// findNIC is a guest shell function: the name of the interface with MAC $1,
// or nothing.
const findNIC = `find_nic() { for d in /sys/class/net/*; do [ "$(cat $d/address 2>/dev/null)" = "$1" ] && { echo ${d##*/}; return 0; }; done; return 1; }
`

// WaitNIC waits until an interface with mac shows in the guest (a hotplug
// the guest's kernel took: ACPI or PCIe hotplug, then virtio_net's probe)
// and returns its name. The guest polls every 50 ms.
func (g *Guest) WaitNIC(ctx context.Context, mac net.HardwareAddr) (string, error) {
	for {
		out, rc, err := g.Exec(ctx, findNIC+fmt.Sprintf(`i=0; while [ $i -lt 100 ]; do find_nic %s && exit 0; sleep 0.05; i=$((i+1)); done; exit 1`, mac))
		if err != nil {
			return "", fmt.Errorf("guest: wait for NIC %s: %w", mac, err)
		}
		if rc == 0 {
			return strings.TrimSpace(out), nil
		}
	}
}

// WaitNICGone waits until no interface with mac is left in the guest
// (after an unplug).
func (g *Guest) WaitNICGone(ctx context.Context, mac net.HardwareAddr) error {
	for {
		_, rc, err := g.Exec(ctx, findNIC+fmt.Sprintf(`i=0; while [ $i -lt 100 ]; do find_nic %s >/dev/null || exit 0; sleep 0.05; i=$((i+1)); done; exit 1`, mac))
		if err != nil {
			return fmt.Errorf("guest: wait for NIC %s to go: %w", mac, err)
		}
		if rc == 0 {
			return nil
		}
	}
}

// HasNIC reports whether an interface with mac is in the guest now.
func (g *Guest) HasNIC(ctx context.Context, mac net.HardwareAddr) (string, bool, error) {
	out, rc, err := g.Exec(ctx, findNIC+"find_nic "+mac.String())
	return strings.TrimSpace(out), rc == 0, err
}

// Features is the feature word the guest's virtio-net driver acknowledged
// for interface ifname (/sys/class/net/IF/device/features: one '0' or '1'
// per bit, bit 0 first).
func (g *Guest) Features(ctx context.Context, ifname string) (uint64, error) {
	out, err := g.run(ctx, "cat /sys/class/net/"+ifname+"/device/features")
	if err != nil {
		return 0, err
	}
	return ParseFeatures(out)
}

// ParseFeatures decodes a virtio device's sysfs features file: a string of
// '0' and '1', bit 0 first (64 characters on Linux).
func ParseFeatures(s string) (uint64, error) {
	s = strings.TrimSpace(s)
	if len(s) == 0 || len(s) > 64 {
		return 0, fmt.Errorf("guest: features %q: want 1 to 64 bits of 0 and 1", s)
	}
	var w uint64
	for i, c := range s {
		switch c {
		case '1':
			w |= 1 << i
		case '0':
		default:
			return 0, fmt.Errorf("guest: features %q: character %q at bit %d", s, c, i)
		}
	}
	return w, nil
}

// Queues counts the interface's receive and transmit queues as the guest
// shows them (/sys/class/net/IF/queues/rx-N and tx-N): the queue pairs
// its driver turned on.
func (g *Guest) Queues(ctx context.Context, ifname string) (rx, tx int, err error) {
	out, err := g.run(ctx, "ls /sys/class/net/"+ifname+"/queues")
	if err != nil {
		return 0, 0, err
	}
	for _, f := range strings.Fields(out) {
		switch {
		case strings.HasPrefix(f, "rx-"):
			rx++
		case strings.HasPrefix(f, "tx-"):
			tx++
		}
	}
	return rx, tx, nil
}

// SetAddr brings ifname up with addr (CIDR, "10.9.0.2/24").
func (g *Guest) SetAddr(ctx context.Context, ifname, cidr string) error {
	_, err := g.run(ctx, fmt.Sprintf("ip link set %s up && ip addr add %s dev %s", ifname, cidr, ifname))
	return err
}

// Ping sends count echo requests from the guest to addr, 200 ms apart, and
// fails unless every one was answered.
func (g *Guest) Ping(ctx context.Context, addr string, count int) (string, error) {
	out, err := g.run(ctx, fmt.Sprintf("ping -c %d -i 0.2 -W 5 %s", count, addr))
	if err != nil {
		return out, err
	}
	if !strings.Contains(out, fmt.Sprintf("%d packets transmitted, %d packets received", count, count)) {
		return out, fmt.Errorf("guest: ping %s: not every request was answered:\n%s", addr, out)
	}
	return out, nil
}

// run is Exec that fails on a non-zero status.
func (g *Guest) run(ctx context.Context, cmd string) (string, error) {
	out, rc, err := g.Exec(ctx, cmd)
	if err != nil {
		return out, err
	}
	if rc != 0 {
		return out, fmt.Errorf("guest: %q: exit status %d: %s", firstLine(cmd), rc, strings.TrimSpace(out))
	}
	return out, nil
}

// Uptime is the guest's /proc/uptime in seconds.
func (g *Guest) Uptime(ctx context.Context) (time.Duration, error) {
	out, err := g.run(ctx, "cut -d' ' -f1 /proc/uptime")
	if err != nil {
		return 0, err
	}
	s, err := strconv.ParseFloat(strings.TrimSpace(out), 64)
	if err != nil {
		return 0, fmt.Errorf("guest: uptime %q: %w", out, err)
	}
	return time.Duration(s * float64(time.Second)), nil
}
