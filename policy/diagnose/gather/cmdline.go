package gather

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/netctl/netctl/policy/diagnose"
)

// maxCmdline bounds what netctl reads of /proc/PID/cmdline: a QEMU that
// libvirt starts with a few dozen devices has some 10 KiB; Linux limits a
// command line to a quarter of the stack limit (2 MiB with 8 MiB).
const maxCmdline = 4 << 20

// maxDeviceOptions bounds the options of one -device argument: a
// virtio-net-pci has about 60 properties.
const maxDeviceOptions = 512

// deviceOption finds the -device option with id=id in QEMU's command line
// (/proc/PID/cmdline: arguments separated by NUL) and returns its driver
// and the feature properties it sets (diagnose.Props), values as given
// ("off", "false", "on"; a JSON false as "false"). It reads both forms:
// "driver,key=value,..." (",," is a literal comma) and libvirt's JSON
// ({"driver":"virtio-net-pci","id":"net0",...}). found is false when no
// -device has that id (a hot-plugged NIC). The text is untrusted: over
// maxCmdline or an option with more than maxDeviceOptions keys is an
// error.
func deviceOption(cmdline []byte, id string) (driver string, props map[string]string, found bool, err error) {
	if len(cmdline) > maxCmdline {
		return "", nil, false, fmt.Errorf("QEMU's command line is over %d MiB", maxCmdline>>20)
	}
	if id == "" {
		return "", nil, false, nil
	}
	feature := diagnose.Props()
	args := bytes.Split(bytes.TrimSuffix(cmdline, []byte{0}), []byte{0})
	for i := 0; i+1 < len(args); i++ {
		if a := string(args[i]); a != "-device" && a != "--device" {
			continue
		}
		opts, err := parseDeviceArg(string(args[i+1]))
		if err != nil {
			return "", nil, false, err
		}
		if opts["id"] != id {
			continue
		}
		props = map[string]string{}
		for k, v := range opts {
			if slices.Contains(feature, k) {
				props[k] = v
			}
		}
		return opts["driver"], props, true, nil
	}
	return "", nil, false, nil
}

// parseDeviceArg splits one -device argument into its options; the
// driver is under "driver".
func parseDeviceArg(a string) (map[string]string, error) {
	out := map[string]string{}
	if strings.HasPrefix(strings.TrimSpace(a), "{") {
		var m map[string]any
		if err := json.Unmarshal([]byte(a), &m); err != nil {
			return nil, fmt.Errorf("a -device option in JSON that does not parse: %v", err)
		}
		if len(m) > maxDeviceOptions {
			return nil, fmt.Errorf("a -device option with %d keys (at most %d)", len(m), maxDeviceOptions)
		}
		for k, v := range m {
			switch v := v.(type) {
			case string:
				out[k] = v
			case bool:
				out[k] = fmt.Sprint(v)
			case float64:
				out[k] = fmt.Sprint(v)
			}
		}
		return out, nil
	}
	var parts []string
	var cur strings.Builder
	for i := 0; i < len(a); i++ {
		switch {
		case a[i] == ',' && i+1 < len(a) && a[i+1] == ',':
			cur.WriteByte(',')
			i++
		case a[i] == ',':
			parts = append(parts, cur.String())
			cur.Reset()
			if len(parts) > maxDeviceOptions {
				return nil, fmt.Errorf("a -device option with over %d keys", maxDeviceOptions)
			}
		default:
			cur.WriteByte(a[i])
		}
	}
	parts = append(parts, cur.String())
	for j, p := range parts {
		k, v, ok := strings.Cut(p, "=")
		switch {
		case j == 0 && !ok:
			out["driver"] = k
		case ok:
			out[k] = v
		default:
			out[k] = "on" // a bare flag
		}
	}
	return out, nil
}

// qomProperty is one entry of device-list-properties.
type qomProperty struct {
	Name    string          `json:"name"`
	Type    string          `json:"type"`
	Default json.RawMessage `json:"default-value"`
}

// deviceDefaults returns the default values of the feature properties
// (diagnose.Props) among a device type's properties.
func deviceDefaults(props []qomProperty) map[string]bool {
	feature := diagnose.Props()
	out := map[string]bool{}
	for _, p := range props {
		if p.Type != "bool" || !slices.Contains(feature, p.Name) {
			continue
		}
		switch string(bytes.TrimSpace(p.Default)) {
		case "true":
			out[p.Name] = true
		case "false":
			out[p.Name] = false
		}
	}
	return out
}
