package cni

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/netctl/netctl/macvtap"
)

// TestParseConfigSamples: the NAD samples (what KubeVirt's docs, Multus
// and a chain send) parse to what they say.
func TestParseConfigSamples(t *testing.T) {
	want := map[string]func(*Config) string{
		"kubevirt-tap.json": func(c *Config) string {
			if c.Kind != KindTap || c.Queues != 4 || c.Owner != 107 || c.CNIVersion != "0.3.1" || c.LogicNetwork != "default" ||
				c.LinkName("pod37a8eec1ce1") != "tap37a8eec1ce1" {
				return "want a tap, 4 queues, owner 107, version 0.3.1, network default (pod interface pod37a8eec1ce1, tap tap37a8eec1ce1)"
			}
			return ""
		},
		"multus-runtime.json": func(c *Config) string {
			if c.Kind != KindVDPA || c.Mgmtdev != "vdpa_sim_net" || c.MAC.String() != "02:00:00:00:00:01" ||
				c.DeviceInfoFile != "/var/run/k8s.cni.cncf.io/devinfo/cni/netctl-vdpa-abc-net1" {
				return "want vdpa on vdpa_sim_net with the runtime's MAC and device-info file"
			}
			return ""
		},
		"chained.json": func(c *Config) string {
			if c.Profile != "latency" || c.MTU != 9000 || c.Plan != "/etc/netctl/pool.json" || c.Backend != "vhost-net" ||
				c.Conf.RawPrevResult == nil || c.Owner != DefaultOwner {
				return "want latency, mtu 9000, the plan, vhost-net, a prevResult, owner 107"
			}
			return ""
		},
		"macvtap.json": func(c *Config) string {
			if c.Kind != KindMacvtap || c.Master != "eth1" || c.Mode != macvtap.ModeBridge || c.MAC.String() != "02:11:22:33:44:55" {
				return "want a bridge macvtap on eth1 with the MAC"
			}
			return ""
		},
		"stock-tap-like.json": func(c *Config) string {
			if c.Kind != KindTap || c.MTU != 1400 || c.Owner != 0 || c.Queues != 1 {
				return "want a tap, mtu 1400, owner 0, 1 queue"
			}
			return ""
		},
	}
	for name, check := range want {
		b, err := os.ReadFile(filepath.Join("testdata", "nad", name))
		if err != nil {
			t.Fatal(err)
		}
		c, err := ParseConfig(b)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if why := check(c); why != "" {
			t.Errorf("%s: %s; got %+v", name, why, c)
		}
	}
}

// TestParseConfigBad: every bad configuration is a ConfigError with the
// CNI code, a message that says what to fix, and the key and value in
// the details.
func TestParseConfigBad(t *testing.T) {
	for _, c := range badConfigs {
		_, err := ParseConfig([]byte(c.conf))
		var ce *ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("%.80s: got %v, want a ConfigError", c.conf, err)
			continue
		}
		if ce.Code != c.code || !strings.Contains(ce.Msg, c.msg) || !strings.Contains(ce.Details, c.details) || !strings.HasPrefix(ce.Msg, "netctl: ") {
			t.Errorf("%.80s: got code %d msg %q details %q; want code %d, %q in msg, %q in details", c.conf, ce.Code, ce.Msg, ce.Details, c.code, c.msg, c.details)
		}
		if e := ce.CNI(); e.Code != ce.Code || e.Msg != ce.Msg || e.Details != ce.Details {
			t.Errorf("%.80s: CNI() = %+v", c.conf, e)
		}
	}
}

// TestParseConfigDefaults: a bare configuration is a tap, one queue,
// owner 107, the chain's backend, the kernel's MTU.
func TestParseConfigDefaults(t *testing.T) {
	c, err := ParseConfig([]byte(`{"cniVersion":"1.1.0","name":"n","type":"netctl","backend":"auto","cni.dev/x":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Kind != KindTap || c.Queues != 1 || c.Owner != 107 || c.Backend != "" || c.MTU != 0 || c.MAC != nil {
		t.Errorf("defaults: %+v", c)
	}
}

const base = `"cniVersion":"1.1.0","name":"n","type":"netctl"`

// badConfigs are configurations netctl refuses: the CNI code, what the
// message says to do, and what the details name.
var badConfigs = []struct {
	conf    string
	code    uint
	msg     string // in the message: what to do
	details string // in the details
}{
	{`not json`, types.ErrDecodingFailure, "not a JSON object", ""},
	{`[]`, types.ErrDecodingFailure, "not a JSON object", ""},
	{`null`, types.ErrDecodingFailure, "not a JSON object", ""},
	{`{"name":"n","type":"netctl"}`, types.ErrInvalidNetworkConfig, `add "cniVersion"`, ""},
	{`{"cniVersion":"1.1.0","type":"netctl"}`, types.ErrInvalidNetworkConfig, `add "name"`, ""},
	{`{"cniVersion":"0.2.0","name":"n","type":"netctl"}`, types.ErrIncompatibleCNIVersion, "needs 0.3.0 or later", `"cniVersion": "0.2.0"`},
	{`{"cniVersion":"x","name":"n","type":"netctl"}`, types.ErrIncompatibleCNIVersion, "needs 0.3.0 or later", `"cniVersion": "x"`},
	{`{` + base + `,"queue":4}`, types.ErrUnsupportedField, "fix its spelling", `"queue": 4`},
	{`{` + base + `,"queues":0}`, types.ErrInvalidNetworkConfig, "use 1 to 256", `"queues": 0`},
	{`{` + base + `,"queues":257}`, types.ErrInvalidNetworkConfig, "use 1 to 256", `"queues": 257`},
	{`{` + base + `,"queues":"4"}`, types.ErrInvalidNetworkConfig, "unquoted", `"queues": "4"`},
	{`{` + base + `,"queues":2.5}`, types.ErrInvalidNetworkConfig, "use 1 to 256", `"queues": 2.5`},
	{`{` + base + `,"queues":1e400}`, types.ErrInvalidNetworkConfig, "use 1 to 256", `"queues"`},
	{`{` + base + `,"owner":-1}`, types.ErrInvalidNetworkConfig, "uid", `"owner": -1`},
	{`{` + base + `,"owner":"qemu"}`, types.ErrInvalidNetworkConfig, "unquoted", `"owner"`},
	{`{` + base + `,"mtu":67}`, types.ErrInvalidNetworkConfig, "68 to 65521", `"mtu": 67`},
	{`{` + base + `,"mtu":65522}`, types.ErrInvalidNetworkConfig, "68 to 65521", `"mtu": 65522`},
	{`{` + base + `,"profile":"fast"}`, types.ErrInvalidNetworkConfig, "throughput, latency, compat", `"profile": "fast"`},
	{`{` + base + `,"profile":1}`, types.ErrInvalidNetworkConfig, "quote it", `"profile": 1`},
	{`{` + base + `,"backend":"dpdk"}`, types.ErrInvalidNetworkConfig, "auto, vdpa, vhost-net, userspace", `"backend": "dpdk"`},
	{`{` + base + `,"backend":"vdpa"}`, types.ErrInvalidNetworkConfig, `needs "mgmtdev"`, `"backend"`},
	{`{` + base + `,"mgmtdev":"vdpa_sim_net","backend":"vhost-net"}`, types.ErrInvalidNetworkConfig, `remove "backend"`, `"backend": "vhost-net"`},
	{`{` + base + `,"mgmtdev":"vdpa_sim_net","master":"eth1"}`, types.ErrInvalidNetworkConfig, "not both", `"mgmtdev"`},
	{`{` + base + `,"mgmtdev":"../x y"}`, types.ErrInvalidNetworkConfig, "vdpa mgmtdev show", `"mgmtdev"`},
	{`{` + base + `,"plan":"pool.json"}`, types.ErrInvalidNetworkConfig, "absolute path", `"plan": "pool.json"`},
	{`{` + base + `,"master":"a/b"}`, types.ErrInvalidNetworkConfig, "lower device's name", `"master": "a/b"`},
	{`{` + base + `,"master":"abcdefghijklmnop"}`, types.ErrInvalidNetworkConfig, "1 to 15", `"master"`},
	{`{` + base + `,"mode":"bridge"}`, types.ErrInvalidNetworkConfig, `needs "master"`, `"mode"`},
	{`{` + base + `,"master":"eth1","mode":"hub"}`, types.ErrInvalidNetworkConfig, "bridge, vepa", `"mode": "hub"`},
	{`{` + base + `,"mac":"01:00:5e:00:00:01"}`, types.ErrInvalidNetworkConfig, "unicast", `"mac"`},
	{`{` + base + `,"mac":"zz"}`, types.ErrInvalidNetworkConfig, "unicast", `"mac": "zz"`},
	{`{` + base + `,"runtimeConfig":{"mac":"nope"}}`, types.ErrInvalidNetworkConfig, "unicast", `"runtimeConfig.mac": "nope"`},
	{`{` + base + `,"runtimeConfig":{"CNIDeviceInfoFile":"rel/x"}}`, types.ErrInvalidNetworkConfig, "absolute path", `"runtimeConfig.CNIDeviceInfoFile"`},
	{`{` + base + `,"runtimeConfig":{"CNIDeviceInfoFile":"/etc/sudoers.d/netctl"}}`, types.ErrInvalidNetworkConfig, "under /var/run/k8s.cni.cncf.io/devinfo/", `"runtimeConfig.CNIDeviceInfoFile": "/etc/sudoers.d/netctl"`},
	{`{` + base + `,"runtimeConfig":{"CNIDeviceInfoFile":"/var/run/k8s.cni.cncf.io/devinfo/cni/../../../../etc/cron.d/x"}}`, types.ErrInvalidNetworkConfig, "under /var/run/k8s.cni.cncf.io/devinfo/", `"runtimeConfig.CNIDeviceInfoFile"`},
	{`{` + base + `,"runtimeConfig":{"CNIDeviceInfoFile":"/var/run/k8s.cni.cncf.io/devinfo"}}`, types.ErrInvalidNetworkConfig, "under /var/run/k8s.cni.cncf.io/devinfo/", `"runtimeConfig.CNIDeviceInfoFile"`},
	{`{` + base + `,"runtimeConfig":[]}`, types.ErrInvalidNetworkConfig, "is an object", `"runtimeConfig"`},
	{`{` + base + `,"args":[]}`, types.ErrInvalidNetworkConfig, "is an object", `"args"`},
	{`{` + base + `,"args":{"cni":{"logicNetworkName":5}}}`, types.ErrInvalidNetworkConfig, "quote it", `"args.cni.logicNetworkName": 5`},
	{`{` + base + `,"ipam":{"type":"host-local"}}`, types.ErrInvalidNetworkConfig, `remove "ipam"`, `"ipam"`},
	{`{` + base + `,"dns":"x"}`, types.ErrDecodingFailure, "CNI spec", ""},
	{`{` + base + `,"` + strings.Repeat("k", 100) + `":1}`, types.ErrUnsupportedField, "fix its spelling", "..."},
	{strings.Repeat(" ", MaxConfig+1), types.ErrInvalidNetworkConfig, "at most", ""},
}
