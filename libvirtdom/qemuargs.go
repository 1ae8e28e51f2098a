package libvirtdom

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/qemuproc"
)

// SystemPIDDir is where the system QEMU driver (qemu:///system) writes
// the pid file of each domain's QEMU (NAME.pid).
const SystemPIDDir = "/run/libvirt/qemu"

// QEMUArgs is the command line of the QEMU libvirt started for domain
// name, from its pid file in dir (SystemPIDDir for qemu:///system) and
// /proc: read only, nothing asked of QEMU or libvirt (so nothing is
// tainted). The process must be a QEMU whose -name is the domain's.
// Errors wrap os.ErrNotExist (no pid file or process) or errs.ErrInvalid.
func QEMUArgs(dir, name string) ([]string, error) {
	if name == "" || filepath.Base(name) != name || strings.HasPrefix(name, ".") {
		return nil, fmt.Errorf("domain name %q: %w", clip(name), errs.ErrInvalid)
	}
	b, err := os.ReadFile(filepath.Join(dir, name+".pid"))
	if err != nil {
		return nil, fmt.Errorf("QEMU of %s: %w", name, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return nil, fmt.Errorf("QEMU of %s: pid file %q: %w", name, clip(string(b)), errs.ErrInvalid)
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil, fmt.Errorf("QEMU of %s (pid %d): %w", name, pid, err)
	}
	argv, _ := qemuproc.SplitCmdline(raw)
	c, err := qemuproc.ParseCmdline(argv)
	if err != nil || c.Name != name {
		return nil, fmt.Errorf("QEMU of %s: pid %d is not that domain's QEMU: %w", name, pid, errs.ErrInvalid)
	}
	return argv, nil
}

// maxNetdevs bounds the -netdev options read.
const maxNetdevs = 4096

// NetdevVhost reads from a QEMU command line whether each tap netdev
// libvirt made runs vhost-net, keyed by the interface's alias (libvirt
// names the netdev "host"+alias: hostnet0 for net0): true for vhost=on (or
// a vhostfd given), false otherwise. An interface hotplugged after the
// start is not on the command line, so not in the map. Both forms libvirt
// writes are read: JSON ({"type":"tap","vhost":true,...}) and QemuOpts
// (tap,id=hostnet0,vhost=on,...).
func NetdevVhost(argv []string) map[string]bool {
	out := map[string]bool{}
	for i := 0; i+1 < len(argv) && len(out) < maxNetdevs; i++ {
		if argv[i] != "-netdev" && argv[i] != "--netdev" {
			continue
		}
		typ, id, vhost, ok := netdevOpts(argv[i+1])
		if ok && typ == "tap" && strings.HasPrefix(id, "host") {
			out[strings.TrimPrefix(id, "host")] = vhost
		}
	}
	return out
}

func netdevOpts(s string) (typ, id string, vhost, ok bool) {
	if strings.HasPrefix(s, "{") {
		var j map[string]any
		if err := json.Unmarshal([]byte(s), &j); err != nil {
			return "", "", false, false
		}
		typ, _ = j["type"].(string)
		id, _ = j["id"].(string)
		switch v := j["vhost"].(type) {
		case bool:
			vhost = v
		case string:
			vhost = v == "on" || v == "true" || v == "yes"
		default:
			_, fd := j["vhostfd"]
			_, fds := j["vhostfds"]
			vhost = fd || fds
		}
		return typ, id, vhost, true
	}
	parts := strings.Split(s, ",")
	typ = parts[0]
	vhostSet := false
	for _, p := range parts[1:] {
		k, v, _ := strings.Cut(p, "=")
		switch k {
		case "type":
			typ = v
		case "id":
			id = v
		case "vhost":
			vhostSet, vhost = true, v == "on" || v == "true" || v == "yes" || v == ""
		case "vhostfd", "vhostfds":
			if !vhostSet {
				vhost = true
			}
		}
	}
	return typ, id, vhost, true
}
