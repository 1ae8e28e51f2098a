package main

import "strings"

// examples are one example per command, by path, shown at the end of its
// --help (and in its man page). TestEveryCommandHasAnExample keeps every
// visible command here and every flag they use real.
var examples = map[string]string{
	"netctl attach":               "netctl attach --vm web1 --id net1 --queues 4 --mac 52:54:00:12:34:56",
	"netctl detach":               "netctl detach --vm web1 --id net1",
	"netctl list":                 "netctl list --vm web1",
	"netctl gc":                   "netctl gc --dry-run",
	"netctl vm":                   "netctl vm list",
	"netctl vm list":              "netctl vm list --json",
	"netctl selftest":             "netctl selftest --queues 2",
	"netctl vdpa":                 "netctl vdpa dev show",
	"netctl vdpa mgmtdev":         "netctl vdpa mgmtdev show",
	"netctl vdpa mgmtdev show":    "netctl vdpa --json mgmtdev show",
	"netctl vdpa dev":             "netctl vdpa dev add --name vd0 --mgmtdev vduse --mac 52:54:00:12:34:56",
	"netctl vdpa dev show":        "netctl vdpa dev show vd0",
	"netctl vdpa dev add":         "netctl vdpa dev add --name vd0 --mgmtdev vduse --mac 52:54:00:12:34:56 --max-vqp 2",
	"netctl vdpa dev del":         "netctl vdpa dev del vd0",
	"netctl vdpa dev config":      "netctl vdpa dev config show vd0",
	"netctl vdpa dev config show": "netctl vdpa --json dev config show vd0",
	"netctl vdpa dev vstats":      "netctl vdpa dev vstats vd0 0",
	"netctl probe":                "netctl probe --json > $(hostname).json",
	"netctl nfd":                  "netctl nfd write --every 5m",
	"netctl nfd write":            "netctl nfd write --qemu 9.1.0 --expiry 30m",
	"netctl nfd show":             "netctl nfd show",
	"netctl nfd remove":           "netctl nfd remove",
	"netctl plan":                 "netctl plan --json host1.json host2.json > pool.json",
	"netctl migrate":              "netctl migrate export --vm guest1 > nics.json",
	"netctl migrate export":       "netctl migrate export --vm guest1 > nics.json",
	"netctl migrate incoming":     "netctl migrate incoming --vm guest1-dst --from nics.json --plan pool.json",
	"netctl migrate finish":       "netctl migrate finish --vm guest1 --quit",
	"netctl diagnose":             "netctl diagnose --vm web1 --id net1",
	"netctl hook":                 "netctl hook install",
	"netctl hook install":         "netctl hook install --config /etc/netctl/hook.json",
	"netctl hook qemu":            "netctl hook qemu -- web1 prepare begin - < web1.xml",
	"netctl hook status":          "netctl hook status web1",
	"netctl hook pin":             "netctl hook pin --dry-run web1",
	"netctl kubevirt":             "netctl kubevirt sidecar --plan /etc/netctl/pool.json --qemu 9.1.0",
	"netctl kubevirt sidecar":     "netctl kubevirt sidecar --socket-dir /var/run/kubevirt-hooks --plan /etc/netctl/pool.json --qemu 9.1.0",
	"netctl stats":                "netctl stats --vm web1 --interval 1s --watch",
	"netctl exporter":             "netctl exporter --listen 127.0.0.1:9465",
	"netctl vhost-user":           "netctl vhost-user --socket /run/netctl/web1-net0.sock --tap web1tap0 --queues 2",
	"netctl cni":                  "CNI_COMMAND=ADD CNI_CONTAINERID=c1 CNI_NETNS=/var/run/netns/pod1 CNI_IFNAME=eth1 CNI_PATH=/opt/cni/bin netctl cni < netctl.conflist",
	"netctl version":              "netctl version --json",
}

// withExample is desc with the example for path at its end.
func withExample(desc, path string) string {
	ex, ok := examples[path]
	if !ok {
		return desc
	}
	if desc = strings.TrimRight(desc, "\n"); desc != "" {
		desc += "\n\n"
	}
	return desc + "Example:\n   " + ex
}
