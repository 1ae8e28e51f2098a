package cni

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/policy"
)

// Kind is what ADD makes.
type Kind string

const (
	KindTap     Kind = "tap"
	KindMacvtap Kind = "macvtap"
	KindVDPA    Kind = "vdpa"
)

// DefaultOwner is the tap's owner when the config names none: the uid
// of qemu in KubeVirt's virt-launcher image.
const DefaultOwner = 107

// MaxConfig bounds the network configuration read from stdin (a
// prevResult included).
const MaxConfig = 1 << 20

// Config is a validated network configuration.
type Config struct {
	CNIVersion string
	Name       string
	Kind       Kind
	Queues     int    // queue pairs, 1 to policy.MaxQueues
	Profile    string // policy's profile ("" is throughput)
	Backend    string // policy's backend preference ("" is the chain)
	Owner      int    // the tap's owner uid
	MTU        int    // 0: the kernel's default
	Plan       string // a pool plan file (netctl plan -j), absolute; "" none
	Master     string // KindMacvtap: the lower device
	Mode       macvtap.Mode
	Mgmtdev    string           // KindVDPA: the management device
	MAC        net.HardwareAddr // nil: the kernel's (tap, macvtap) or the device's (vdpa)
	// DeviceInfoFile is runtimeConfig.CNIDeviceInfoFile (NPWG
	// device-info spec), where a vdpa device is published; "" none.
	DeviceInfoFile string
	// LogicNetwork is args.cni.logicNetworkName, which KubeVirt's
	// binding flow passes (the VMI's network name); "" none.
	LogicNetwork string
	// Conf is the configuration as the library reads it (prevResult).
	Conf types.PluginConf
}

// LinkName is the name of the link ADD makes in the pod for CNI_IFNAME
// ifname: with KubeVirt's logicNetworkName, "tap" and the pod interface
// name's hash (KubeVirt's namescheme: pod interface "pod" +
// hex(sha256(network))[:11]; its domainAttachmentType: tap uses the link
// "tap" + that name[3:] when it exists); else ifname itself.
func (c *Config) LinkName(ifname string) string {
	if c.LogicNetwork == "" {
		return ifname
	}
	h := sha256.Sum256([]byte(c.LogicNetwork))
	return "tap" + hex.EncodeToString(h[:])[:11]
}

// keys are the configuration keys netctl reads, with what each takes
// (for the message that names an unknown key).
var keys = []string{"queues", "profile", "owner", "mtu", "plan", "backend", "master", "mode", "mgmtdev", "mac"}

// reserved are the keys the CNI spec and the runtimes define.
var reserved = []string{"cniVersion", "cniVersions", "name", "type", "capabilities", "ipam", "dns", "prevResult",
	"runtimeConfig", "args"}

// Versions are the spec versions netctl speaks: from 0.3.0, the first
// whose result lists interfaces.
var Versions = version.PluginSupports("0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0")

// ConfigError is a configuration netctl refuses, as a CNI error: Code
// (types.ErrUnsupportedField for an unknown key, ErrDecodingFailure for
// what is not JSON, else ErrInvalidNetworkConfig), Msg saying what to
// fix, Details naming the key and its value.
type ConfigError struct {
	Code    uint
	Msg     string
	Details string
}

func (e *ConfigError) Error() string { return e.Msg }

// CNI is the error as skel prints it.
func (e *ConfigError) CNI() *types.Error { return types.NewError(e.Code, e.Msg, e.Details) }

func badKey(key string, v json.RawMessage, format string, args ...any) *ConfigError {
	return &ConfigError{Code: types.ErrInvalidNetworkConfig, Msg: "netctl: " + fmt.Sprintf(format, args...),
		Details: fmt.Sprintf("%q: %s", key, clip(string(v)))}
}

// clip bounds a value quoted back in a message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// ParseConfig reads and checks a network configuration (stdin of ADD,
// DEL, CHECK). It touches nothing: the plan file is named, not read.
func ParseConfig(b []byte) (*Config, error) {
	if len(b) > MaxConfig {
		return nil, &ConfigError{Code: types.ErrInvalidNetworkConfig,
			Msg: fmt.Sprintf("netctl: a network configuration of %d bytes: at most %d; a NetworkAttachmentDefinition's config is a few hundred", len(b), MaxConfig)}
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil || raw == nil {
		if err == nil {
			err = fmt.Errorf("null")
		}
		return nil, &ConfigError{Code: types.ErrDecodingFailure,
			Msg: fmt.Sprintf("netctl: the network configuration is not a JSON object (%v): give one such as {\"cniVersion\":\"1.1.0\",\"name\":\"net\",\"type\":\"netctl\"}", err)}
	}
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		if slices.Contains(keys, k) || slices.Contains(reserved, k) || strings.HasPrefix(k, "cni.dev/") {
			continue
		}
		return nil, &ConfigError{Code: types.ErrUnsupportedField,
			Msg: fmt.Sprintf("netctl: unknown key %q: netctl takes %s (and the CNI keys): fix its spelling or remove it",
				clip(k), strings.Join(keys, ", ")),
			Details: fmt.Sprintf("%q: %s", clip(k), clip(string(raw[k])))}
	}
	c := &Config{Queues: 1, Owner: DefaultOwner}
	var err error
	if c.CNIVersion, err = str(raw, "cniVersion"); err != nil {
		return nil, err
	}
	if c.CNIVersion == "" {
		return nil, &ConfigError{Code: types.ErrInvalidNetworkConfig, Msg: `netctl: the configuration has no cniVersion: add "cniVersion": "1.1.0"`}
	}
	if ok, err := version.GreaterThanOrEqualTo(c.CNIVersion, "0.3.0"); err != nil || !ok {
		return nil, &ConfigError{Code: types.ErrIncompatibleCNIVersion,
			Msg:     fmt.Sprintf("netctl: cniVersion %q: netctl's result lists the interface it makes, which needs 0.3.0 or later: use \"cniVersion\": \"1.1.0\" (or 0.3.1)", clip(c.CNIVersion)),
			Details: fmt.Sprintf("%q: %s", "cniVersion", clip(string(raw["cniVersion"])))}
	}
	if c.Name, err = str(raw, "name"); err != nil {
		return nil, err
	}
	if c.Name == "" {
		return nil, &ConfigError{Code: types.ErrInvalidNetworkConfig, Msg: `netctl: the configuration has no name: add "name": "<network name>"`}
	}
	if err := json.Unmarshal(b, &c.Conf); err != nil {
		return nil, &ConfigError{Code: types.ErrDecodingFailure,
			Msg: fmt.Sprintf("netctl: the CNI keys of the configuration do not decode (%v): fix them as the CNI spec defines them", err)}
	}
	if c.Conf.IPAM.Type != "" {
		return nil, badKey("ipam", raw["ipam"], "netctl makes the VM's NIC and runs no IPAM (the guest gets its address itself): remove \"ipam\"")
	}
	if c.Queues, err = integer(raw, "queues", 1, 1, policy.MaxQueues, "queue pairs: use 1 to %d (the VM's vCPUs, at most)", policy.MaxQueues); err != nil {
		return nil, err
	}
	if c.Owner, err = integer(raw, "owner", DefaultOwner, 0, math.MaxInt32, "the tap's owner is a uid: use 0 to %d (107 is qemu in virt-launcher)", math.MaxInt32); err != nil {
		return nil, err
	}
	if c.MTU, err = integer(raw, "mtu", 0, 68, 65521, "use an MTU of 68 to 65521, or leave \"mtu\" out for 1500"); err != nil {
		return nil, err
	}
	if c.Profile, err = oneOf(raw, "profile", policy.Throughput, policy.Latency, policy.Compat); err != nil {
		return nil, err
	}
	if c.Backend, err = oneOf(raw, "backend", "auto", policy.BackendVDPA, policy.BackendVhostNet, policy.BackendUserspace); err != nil {
		return nil, err
	}
	if c.Backend == "auto" {
		c.Backend = ""
	}
	if c.Plan, err = str(raw, "plan"); err != nil {
		return nil, err
	}
	if c.Plan != "" && (!filepath.IsAbs(c.Plan) || len(c.Plan) > 4096 || strings.ContainsRune(c.Plan, 0)) {
		return nil, badKey("plan", raw["plan"], "\"plan\" is the absolute path of a pool plan file (netctl plan -j > /etc/netctl/pool.json)")
	}
	if c.Master, err = str(raw, "master"); err != nil {
		return nil, err
	}
	if c.Master != "" && !validIfname(c.Master) {
		return nil, badKey("master", raw["master"], "\"master\" is the lower device's name (1 to 15 characters, no '/', ':' or spaces)")
	}
	mode, err := str(raw, "mode")
	if err != nil {
		return nil, err
	}
	if mode != "" {
		if c.Master == "" {
			return nil, badKey("mode", raw["mode"], "\"mode\" is a macvtap's mode and needs \"master\" (the lower device): add it, or remove \"mode\"")
		}
		if c.Mode, err = macvtap.ParseMode(mode); err != nil {
			return nil, badKey("mode", raw["mode"], "use a macvtap mode: bridge, vepa, private, passthru or source")
		}
	}
	if c.Mgmtdev, err = str(raw, "mgmtdev"); err != nil {
		return nil, err
	}
	if c.Mgmtdev != "" && !validMgmtdev(c.Mgmtdev) {
		return nil, badKey("mgmtdev", raw["mgmtdev"], "\"mgmtdev\" names a vdpa management device as `vdpa mgmtdev show` lists it (vdpa_sim_net, pci/0000:3b:00.2)")
	}
	if c.MAC, err = macKey(raw, "mac"); err != nil {
		return nil, err
	}
	if a, ok := raw["args"]; ok {
		var args struct {
			CNI struct {
				Logic json.RawMessage `json:"logicNetworkName"`
			} `json:"cni"`
		}
		if err := json.Unmarshal(a, &args); err != nil {
			return nil, badKey("args", a, "\"args\" is an object (KubeVirt passes {\"cni\": {\"logicNetworkName\": NAME}})")
		}
		if args.CNI.Logic != nil {
			sub := map[string]json.RawMessage{"args.cni.logicNetworkName": args.CNI.Logic}
			if c.LogicNetwork, err = str(sub, "args.cni.logicNetworkName"); err != nil {
				return nil, err
			}
			if len(c.LogicNetwork) > 253 {
				return nil, badKey("args.cni.logicNetworkName", args.CNI.Logic, "a network name of at most 253 characters (the VMI's spec.networks[].name)")
			}
		}
	}
	if rc, ok := raw["runtimeConfig"]; ok {
		var r struct {
			MAC        json.RawMessage `json:"mac"`
			DeviceInfo json.RawMessage `json:"CNIDeviceInfoFile"`
		}
		if err := json.Unmarshal(rc, &r); err != nil {
			return nil, badKey("runtimeConfig", rc, "\"runtimeConfig\" is an object (the runtime sets it)")
		}
		sub := map[string]json.RawMessage{}
		if r.MAC != nil {
			sub["runtimeConfig.mac"] = r.MAC
		}
		if r.DeviceInfo != nil {
			sub["runtimeConfig.CNIDeviceInfoFile"] = r.DeviceInfo
		}
		if m, err := macKey(sub, "runtimeConfig.mac"); err != nil {
			return nil, err
		} else if m != nil {
			c.MAC = m // the runtime's (the pod's) wins over the config's
		}
		if c.DeviceInfoFile, err = str(sub, "runtimeConfig.CNIDeviceInfoFile"); err != nil {
			return nil, err
		}
		if f := c.DeviceInfoFile; f != "" && !devInfoPath(f) {
			return nil, badKey("runtimeConfig.CNIDeviceInfoFile", r.DeviceInfo, "the device-info file is an absolute path under %s (the NPWG spec's; Multus gives %scni/...)", DevInfoDirs[0], DevInfoDirs[0])
		}
	}
	switch {
	case c.Master != "" && c.Mgmtdev != "":
		return nil, badKey("mgmtdev", raw["mgmtdev"], "give either \"master\" (a macvtap on that device) or \"mgmtdev\" (a vdpa device), not both")
	case c.Mgmtdev != "":
		c.Kind = KindVDPA
		if c.Backend != "" && c.Backend != policy.BackendVDPA {
			return nil, badKey("backend", raw["backend"], "\"mgmtdev\" makes a vdpa device, which backend %s cannot use: remove \"backend\" (or set it to vdpa), or remove \"mgmtdev\" for a tap", c.Backend)
		}
	case c.Master != "":
		c.Kind = KindMacvtap
	default:
		c.Kind = KindTap
	}
	if c.Backend == policy.BackendVDPA && c.Kind != KindVDPA {
		return nil, badKey("backend", raw["backend"], "backend vdpa needs \"mgmtdev\" (the management device netctl makes the vdpa device from): add it")
	}
	return c, nil
}

// DevInfoDirs are where a device-info file may be written: the NPWG
// device-info spec's directory (/var/run is /run on most nodes). The
// path is configuration (a NetworkAttachmentDefinition may carry its own
// "runtimeConfig"), so it is held there: ADD, as root, writes no file
// and makes no directory elsewhere (/etc/sudoers.d/x, /etc/cron.d/x).
var DevInfoDirs = []string{"/var/run/k8s.cni.cncf.io/devinfo/", "/run/k8s.cni.cncf.io/devinfo/"}

// devInfoPath: f is a clean absolute path of a file under DevInfoDirs.
func devInfoPath(f string) bool {
	if len(f) > 4096 || strings.ContainsRune(f, 0) || filepath.Clean(f) != f {
		return false
	}
	for _, d := range DevInfoDirs {
		if strings.HasPrefix(f, d) && len(f) > len(d) {
			return true
		}
	}
	return false
}

// str reads a string key ("" when absent).
func str(raw map[string]json.RawMessage, key string) (string, error) {
	v, ok := raw[key]
	if !ok || string(v) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", badKey(key, v, "%q is a string: quote it", key)
	}
	return s, nil
}

// integer reads a whole-number key within [lo, hi] (def when absent).
func integer(raw map[string]json.RawMessage, key string, def, lo, hi int, want string, args ...any) (int, error) {
	v, ok := raw[key]
	if !ok || string(v) == "null" {
		return def, nil
	}
	d := json.NewDecoder(bytes.NewReader(v))
	d.UseNumber()
	var n json.Number
	if err := d.Decode(&n); err != nil || bytes.HasPrefix(bytes.TrimSpace(v), []byte(`"`)) {
		return 0, badKey(key, v, "%q is a number, unquoted: %s", key, fmt.Sprintf(want, args...))
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil || i < int64(lo) || i > int64(hi) {
		return 0, badKey(key, v, "%q %s: %s", key, clip(string(n)), fmt.Sprintf(want, args...))
	}
	return int(i), nil
}

// oneOf reads a string key that must be one of the values ("" allowed).
func oneOf(raw map[string]json.RawMessage, key string, values ...string) (string, error) {
	s, err := str(raw, key)
	if err != nil || s == "" || slices.Contains(values, s) {
		return s, err
	}
	return "", badKey(key, raw[key], "%q %q: use %s", key, clip(s), strings.Join(values, ", "))
}

// macKey reads a unicast Ethernet address.
func macKey(raw map[string]json.RawMessage, key string) (net.HardwareAddr, error) {
	s, err := str(raw, key)
	if err != nil || s == "" {
		return nil, err
	}
	m, err := net.ParseMAC(s)
	if err != nil || len(m) != 6 || m[0]&1 != 0 {
		return nil, badKey(key, raw[key], "%q is a unicast Ethernet address such as 02:00:00:00:00:01", key)
	}
	return m, nil
}

// validIfname: what the kernel takes as a link name (dev_valid_name).
func validIfname(s string) bool {
	if s == "" || len(s) > 15 || s == "." || s == ".." {
		return false
	}
	return !strings.ContainsAny(s, "/: \t\n\x00")
}

func validMgmtdev(s string) bool {
	if len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_.:/", c) >= 0) {
			return false
		}
	}
	return s != ""
}

// ValidIfname says whether CNI_IFNAME can name the link netctl makes.
func ValidIfname(s string) bool { return validIfname(s) }
