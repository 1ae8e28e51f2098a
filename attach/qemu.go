package attach

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/qmp"
)

// monitorWait is how long dialQMP waits for QEMU's greeting.
var monitorWait = 10 * time.Second

// maxIDs bounds how many ids attach reads from QEMU (info network lines,
// qom-list entries, fdsets).
const maxIDs = 4096

// qemuState is what attach reads from QEMU before it changes anything.
type qemuState struct {
	Version string // "7.2.22"
	Name    string // -name, "" if none
	Machine string // "pc-i440fx-7.2-machine"
	Netdevs map[string]bool
	Devices map[string]bool
	Types   map[string]string // device id -> its type (qom-list /machine/peripheral)
	FDSets  []fdset
	// FreePorts are root ports with nothing plugged in, among those
	// checked and in the order checked (freePorts: QEMU reads one port's
	// bus a command, so only the ports a decision needs are read): where
	// a hotplugged NIC can go.
	FreePorts []string
}

type fdset struct {
	ID  int `json:"fdset-id"`
	FDs []struct {
		FD     int    `json:"fd"`
		Opaque string `json:"opaque"`
	} `json:"fds"`
}

// readQEMU reads the version, name, machine, netdev and device ids and
// fdsets, in one pipelined batch. (Which root ports are free is read
// apart, for the ports a decision needs: freePorts.) A peer that does not
// answer query-version like QEMU is refused.
func readQEMU(ctx context.Context, c *qmp.Client) (*qemuState, error) {
	s := &qemuState{}
	var v struct {
		QEMU struct{ Major, Minor, Micro int } `json:"qemu"`
	}
	var name struct {
		Name string `json:"name"`
	}
	var network string
	var props peripheralProps
	errs := c.Batch(ctx, []qmp.Cmd{
		{Name: "query-version", Out: &v},
		{Name: "query-name", Out: &name},
		{Name: "qom-get", Args: map[string]string{"path": "/machine", "property": "type"}, Out: &s.Machine},
		{Name: "human-monitor-command", Args: map[string]string{"command-line": "info network"}, Out: &network},
		{Name: "qom-list", Args: map[string]string{"path": "/machine/peripheral"}, Out: &props},
		{Name: "query-fdsets", Out: &s.FDSets},
	})
	if err := errs[0]; err != nil {
		return nil, fmt.Errorf("query-version: %w (is the socket QEMU's QMP monitor?)", err)
	}
	if v.QEMU.Major < 1 || v.QEMU.Major > 99 || v.QEMU.Minor < 0 || v.QEMU.Micro < 0 {
		return nil, fmt.Errorf("query-version: version %d.%d.%d is not QEMU's: %w", v.QEMU.Major, v.QEMU.Minor, v.QEMU.Micro, ErrInvalid)
	}
	s.Version = fmt.Sprintf("%d.%d.%d", v.QEMU.Major, v.QEMU.Minor, v.QEMU.Micro)
	if err := errs[1]; err != nil {
		return nil, fmt.Errorf("query-name: %w", err)
	}
	s.Name = name.Name
	if err := errs[2]; err != nil {
		return nil, fmt.Errorf("machine type (qom-get /machine type): %w", err)
	}
	if err := errs[3]; err != nil {
		return nil, fmt.Errorf("info network: %w", err)
	}
	var err error
	if s.Netdevs, err = parseNetdevIDs(network); err != nil {
		return nil, err
	}
	if err := errs[4]; err != nil {
		return nil, fmt.Errorf("qom-list /machine/peripheral: %w", err)
	}
	types, err := props.types()
	if err != nil {
		return nil, err
	}
	s.Devices, s.Types = map[string]bool{}, types
	for id := range types {
		s.Devices[id] = true
	}
	if err := errs[5]; err != nil {
		return nil, fmt.Errorf("query-fdsets: %w", err)
	}
	if len(s.FDSets) > maxIDs {
		return nil, fmt.Errorf("query-fdsets: %d fdsets (at most %d): %w", len(s.FDSets), maxIDs, ErrInvalid)
	}
	return s, nil
}

// netdevIDs reads the ids of QEMU's network clients (netdevs and NICs)
// from HMP's "info network" (QMP has no netdev query before QEMU 9):
// every line "ID: index=N,type=..." with its leading " \ " trimmed.
func netdevIDs(ctx context.Context, c *qmp.Client) (map[string]bool, error) {
	out, err := infoNetwork(ctx, c)
	if err != nil {
		return nil, err
	}
	return parseNetdevIDs(out)
}

func infoNetwork(ctx context.Context, c *qmp.Client) (string, error) {
	var out string
	if err := c.Run(ctx, "human-monitor-command", map[string]string{"command-line": "info network"}, &out); err != nil {
		return "", fmt.Errorf("info network: %w", err)
	}
	return out, nil
}

// parseNetdevIDs reads the client ids of "info network" text (untrusted:
// at most 1 MiB and maxIDs ids).
func parseNetdevIDs(out string) (map[string]bool, error) {
	if len(out) > 1<<20 {
		return nil, fmt.Errorf("info network printed %d bytes (at most 1 MiB): %w", len(out), ErrInvalid)
	}
	ids := map[string]bool{}
	for line := range strings.SplitSeq(out, "\n") {
		line = strings.TrimLeft(strings.TrimSuffix(line, "\r"), ` \`)
		id, rest, ok := strings.Cut(line, ": ")
		if !ok || !strings.HasPrefix(rest, "index=") || id == "" {
			continue
		}
		if len(ids) >= maxIDs {
			return nil, fmt.Errorf("info network lists over %d clients: %w", maxIDs, ErrInvalid)
		}
		ids[id] = true
	}
	return ids, nil
}

// deviceIDs reads the ids of the devices given an id
// (qom-list /machine/peripheral: their child<TYPE> properties).
func deviceIDs(ctx context.Context, c *qmp.Client) (map[string]bool, error) {
	types, err := peripheral(ctx, c)
	if err != nil {
		return nil, err
	}
	ids := map[string]bool{}
	for id := range types {
		ids[id] = true
	}
	return ids, nil
}

// rootPortTypes are the PCIe root ports a NIC can be hotplugged into.
var rootPortTypes = map[string]bool{"pcie-root-port": true, "ioh3420": true}

// rootPorts are the ids of the root ports a NIC can be hotplugged into,
// sorted.
func rootPorts(types map[string]string) []string {
	var ports []string
	for _, id := range sortedKeys(types) {
		if rootPortTypes[types[id]] {
			ports = append(ports, id)
		}
	}
	return ports
}

// maxPortChunk is the most root ports freePorts reads in one pipelined
// batch when it looks for the first free one (it reads 1, then 2, 4, 8,
// 8, ...: the first port is usually free).
const maxPortChunk = 8

// freePorts returns which of the root ports ids (in their order) have
// nothing plugged in: the bus of port ID is /machine/peripheral/ID/ID,
// and every device on it is a child[N] link there. (query-pci cannot
// tell before the firmware has numbered the buses: on a paused VM every
// bridge looks empty.) QEMU runs one such qom-list at a time, each longer
// than a round trip (0.4 ms on a quiet host), so with first it reads them
// in growing pipelined chunks (1, 2, 4, then maxPortChunk) and stops
// after the chunk that holds the first free port.
func freePorts(ctx context.Context, c *qmp.Client, ids []string, first bool) ([]string, error) {
	type prop struct {
		Name string `json:"name"`
	}
	var free []string
	chunk := 1
	for start := 0; start < len(ids); {
		end := len(ids)
		if first {
			end = min(start+chunk, len(ids))
			chunk = min(2*chunk, maxPortChunk)
		}
		part := ids[start:end]
		props := make([][]prop, len(part))
		cmds := make([]qmp.Cmd, len(part))
		for i, id := range part {
			cmds[i] = qmp.Cmd{Name: "qom-list", Args: map[string]string{"path": "/machine/peripheral/" + id + "/" + id}, Out: &props[i]}
		}
		for i, err := range c.Batch(ctx, cmds) {
			if err != nil {
				return nil, fmt.Errorf("qom-list root port %s's bus: %w", part[i], err)
			}
			used := false
			for _, p := range props[i] {
				used = used || strings.HasPrefix(p.Name, "child[")
			}
			if !used {
				free = append(free, part[i])
			}
		}
		if first && len(free) > 0 {
			break
		}
		start = end
	}
	return free, nil
}

// peripheralProps is qom-list /machine/peripheral's answer.
type peripheralProps []struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// types are the devices given an id, and their types (untrusted: at
// most maxIDs).
func (props peripheralProps) types() (map[string]string, error) {
	if len(props) > maxIDs {
		return nil, fmt.Errorf("qom-list /machine/peripheral: %d entries (at most %d): %w", len(props), maxIDs, ErrInvalid)
	}
	ids := map[string]string{}
	for _, p := range props {
		if t, ok := strings.CutPrefix(p.Type, "child<"); ok {
			ids[p.Name] = strings.TrimSuffix(t, ">")
		}
	}
	return ids, nil
}

// peripheral reads the devices given an id and their types.
func peripheral(ctx context.Context, c *qmp.Client) (map[string]string, error) {
	var props peripheralProps
	if err := c.Run(ctx, "qom-list", map[string]string{"path": "/machine/peripheral"}, &props); err != nil {
		return nil, fmt.Errorf("qom-list /machine/peripheral: %w", err)
	}
	return props.types()
}

// dialQMP connects to QEMU's QMP socket. QEMU accepts one connection at
// a time and its listen backlog is small: while another client holds the
// monitor a connect fails with EAGAIN, so dialQMP tries again until ctx
// ends.
//
// A monitor held by another client (libvirt keeps its own connection open)
// accepts the connection but never greets: after monitorWait without a
// greeting dialQMP gives up and says so, instead of waiting out ctx.
func dialQMP(ctx context.Context, sock string) (*qmp.Client, error) {
	held := fmt.Sprintf("another client holds this QMP monitor (QEMU serves one at a time; a libvirt domain's monitor is libvirt's: "+
		"use the netctl libvirt hook or virsh attach-device, or give QEMU a second -qmp socket for netctl); waited %v", monitorWait)
	dctx, cancel := context.WithTimeout(ctx, monitorWait)
	defer cancel()
	stray := 0
	for {
		c, err := qmp.Dial(dctx, sock)
		if err == nil {
			return c, nil
		}
		if eventBeforeGreeting(err) && stray < 3 {
			// QEMU 7.2 can write an event of the previous client's
			// session (a DEVICE_DELETED that completes a detach) to a
			// new connection before it greets it: the monitor's
			// session is reset only when it handles the new
			// connection. Connect again.
			stray++
			continue
		}
		if ctx.Err() == nil && dctx.Err() != nil {
			return nil, fmt.Errorf("%w: %s", err, held)
		}
		if !errors.Is(err, unix.EAGAIN) {
			return nil, err
		}
		select {
		case <-dctx.Done():
			if ctx.Err() == nil {
				return nil, fmt.Errorf("%w: %s", err, held)
			}
			return nil, err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// eventBeforeGreeting says whether qmp.Dial refused a connection on
// which QEMU sent an event where its greeting belongs.
func eventBeforeGreeting(err error) bool {
	return errors.Is(err, qmp.ErrProtocol) && strings.Contains(err.Error(), "not a QMP greeting") && strings.Contains(err.Error(), `\"event\"`)
}

// isClass says whether err is QEMU's answer with that error class.
func isClass(err error, class string) bool {
	var qe *qmp.Error
	return errors.As(err, &qe) && qe.Class == class
}

// isQEMUError says whether err is an answer from QEMU (as opposed to a
// broken connection).
func isQEMUError(err error) bool {
	var qe *qmp.Error
	return errors.As(err, &qe)
}

// qmpValue turns a property value as policy gives it ("on", "off", "4")
// into the JSON type device_add takes in QEMU 7.2 (device_add's JSON goes
// through a typed visitor: "on" for a bool is refused).
func qmpValue(v string) any {
	switch v {
	case "on", "true":
		return true
	case "off", "false":
		return false
	}
	if n := json.Number(v); v != "" && strings.Trim(v, "0123456789") == "" && len(v) < 10 {
		if i, err := n.Int64(); err == nil {
			return i
		}
	}
	return v
}
