package nfd

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/policy/host"
)

// Prefix is the namespace of netctl's labels.
const Prefix = "netctl.dev/"

// MaxMgmtdevLabels bounds the per-management-device labels.
const MaxMgmtdevLabels = 64

// Label is one node label: Name without Prefix.
type Label struct {
	Name, Value string
}

// String is the label as a feature file line.
func (l Label) String() string { return Prefix + l.Name + "=" + l.Value }

// Options are what the labels are computed for.
type Options struct {
	// QEMU is the version of the QEMU that runs the VMs (virt-launcher's,
	// not the node's): the feature set is computed for it. "" leaves it
	// unknown (Decide then takes QEMU's newest properties), so the set
	// depends on the kernel alone; a QEMU the probe found on the node is
	// not used, since KubeVirt's VMs do not run it.
	QEMU string
}

// nameRE and valueRE are Kubernetes' label name part and value
// (k8s.io/apimachinery IsQualifiedName's name, IsValidLabelValue).
// They are compiled at first use, not at package init: every netctl
// command (a hook call, a CNI call) would pay for them.
var (
	nameRE  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`) })
	valueRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`) })
)

// ValidName and ValidValue say whether a label's name part (without
// Prefix) and value are what Kubernetes takes; a value starting with @
// is never produced (NFD reads it as a reference), and the value regexp
// cannot match one.
func ValidName(s string) bool  { return len(s) <= 63 && nameRE().MatchString(s) }
func ValidValue(s string) bool { return len(s) <= 63 && valueRE().MatchString(s) }

// Labels are the node labels for probe h, sorted by name:
//
//	netctl.dev/vhost-net=true|false     /dev/vhost-net opens
//	netctl.dev/vdpa=true|false          the vdpa netlink family answers and has a management device
//	netctl.dev/vdpa-mgmtdev.NAME=true   one per management device (pci/0000:65:00.2 -> pci-0000-65-00.2)
//	netctl.dev/tap-uso=true|false       a tap takes USO4 and USO6 (Linux 6.2)
//	netctl.dev/zerocopy=true|false      vhost_net's experimental_zcopytx is on
//	netctl.dev/featureset=fs-HEX        the set netctl plan offers on this node alone
//
// notes say what was left out and why (a management device whose name
// cannot be a label, a probe section that could not be read).
func Labels(h *host.Description, o Options) (labels []Label, notes []string, err error) {
	if h == nil {
		return nil, nil, fmt.Errorf("nfd: no probe: %w", errs.ErrInvalid)
	}
	tf := func(b bool) string { return fmt.Sprint(b) }
	add := func(name, value string) { labels = append(labels, Label{name, value}) }
	add("vhost-net", tf(h.VhostNet.Available))
	if h.VhostNet.Error != "" {
		notes = append(notes, prefixed("vhost-net", h.VhostNet.Error))
	}
	add("vdpa", tf(h.VDPA.Available && len(h.VDPA.MgmtDevs) > 0))
	if h.VDPA.Error != "" {
		notes = append(notes, prefixed("vdpa", h.VDPA.Error))
	}
	seen := map[string]string{}
	for _, m := range h.VDPA.MgmtDevs {
		n := "vdpa-mgmtdev." + mgmtdevName(m)
		switch {
		case len(seen) >= MaxMgmtdevLabels:
			notes = append(notes, fmt.Sprintf("vdpa management device %q: over %d devices, not labelled", clip(m), MaxMgmtdevLabels))
		case !ValidName(n):
			notes = append(notes, fmt.Sprintf("vdpa management device %q: its name cannot be a label name, not labelled", clip(m)))
		case seen[n] != "":
			notes = append(notes, fmt.Sprintf("vdpa management devices %q and %q make the same label %s: labelled once", clip(seen[n]), clip(m), n))
		default:
			seen[n] = m
			add(n, "true")
		}
	}
	// A probe that could not look at taps (not root) knows neither
	// their offloads nor the set: labelling them false would put the
	// node in the wrong pool.
	tapSeen := !strings.HasPrefix(h.Tap.Error, "not probed")
	offl := h.Tap.Offloads
	if tapSeen {
		add("tap-uso", tf(h.Tap.Available && slices.Contains(offl, "uso4") && slices.Contains(offl, "uso6")))
	}
	if h.Tap.Error != "" {
		notes = append(notes, prefixed("tap", h.Tap.Error))
	}
	add("zerocopy", tf(h.ZeroCopy.Enabled))
	if !tapSeen {
		notes = append(notes, "tap-uso and featureset: not labelled, the taps were not probed: run netctl nfd write as root")
	} else if id, err := FeatureSet(h, o); err != nil {
		notes = append(notes, "featureset: "+err.Error()+": not labelled")
	} else {
		add("featureset", id)
	}
	slices.SortFunc(labels, func(a, b Label) int { return strings.Compare(a.Name, b.Name) })
	for _, l := range labels {
		if !ValidName(l.Name) || !ValidValue(l.Value) {
			return nil, nil, fmt.Errorf("nfd: label %s is not a valid node label (a netctl bug): %w", l, errs.ErrInvalid)
		}
	}
	return labels, notes, nil
}

// FeatureSet is the id (policy.FeatureSetID) of the set netctl plan
// offers on h alone, for the QEMU of o: two nodes get the same id
// exactly when plan would offer each the same set, so a VM kept on
// nodes of one id negotiates nothing another of them lacks.
func FeatureSet(h *host.Description, o Options) (string, error) {
	c := *h
	c.QEMU = host.QEMU{}
	c.Devices = nil
	c.Hostname = "node" // one host: its name is not in the set (and "(none)" is no name to plan)
	p, err := policy.Plan([]*host.Description{&c}, policy.Request{QEMU: o.QEMU})
	if err != nil {
		return "", err
	}
	return p.ID, nil
}

// mgmtdevName is a management device's name as a label name part: what
// is not [A-Za-z0-9_.-] becomes '-' (pci/0000:65:00.2 -> pci-0000-65-00.2).
func mgmtdevName(m string) string {
	var b strings.Builder
	for _, r := range m {
		if r < 128 && (r == '_' || r == '.' || r == '-' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	return b.String()
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// prefixed is "what: err" unless err says what already.
func prefixed(what, err string) string {
	if strings.HasPrefix(err, what+":") {
		return err
	}
	return what + ": " + err
}
