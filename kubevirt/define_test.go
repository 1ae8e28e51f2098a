package kubevirt

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"libvirt.org/go/libvirtxml"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/libvirtdom"
	"github.com/netctl/netctl/test/pool"
)

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// tapDomain is testdata/domain-tap.xml: KubeVirt's fixture with the
// interface as virt-launcher's tap attachment writes it and a
// <qemu:commandline> (testdata/README.md).
func tapDomain(t testing.TB) string {
	t.Helper()
	return string(readTestdata(t, "domain-tap.xml"))
}

// ifaceOf parses out and returns it and its interface with alias.
func ifaceOf(t *testing.T, out []byte, alias string) (*libvirtxml.Domain, *libvirtxml.DomainInterface) {
	t.Helper()
	var d libvirtxml.Domain
	if err := d.Unmarshal(string(out)); err != nil {
		t.Fatalf("the result does not parse: %v\n%s", err, out)
	}
	for i := range d.Devices.Interfaces {
		if libvirtdom.Alias(&d.Devices.Interfaces[i]) == alias {
			return &d, &d.Devices.Interfaces[i]
		}
	}
	t.Fatalf("no interface %s in\n%s", alias, out)
	return nil, nil
}

// outsideInterfaces is x without its <interface> elements.
func outsideInterfaces(x string) string {
	for {
		i := strings.Index(x, "<interface")
		if i < 0 {
			return x
		}
		j := strings.Index(x[i:], "</interface>")
		if j < 0 {
			return x
		}
		x = x[:i] + x[i+j+len("</interface>"):]
	}
}

// TestDefineDomainTap: KubeVirt's fixture with the tap attachment's
// interface and the test VMI (netctl binding, multiqueue, 2x2 vCPUs), no
// plan: the interface keeps type ethernet, its tap, MAC, PCI address,
// ACPI index, model, alias and ROM, and its <driver> becomes
// name='vhost' queues='4'; every byte outside the interface is as it
// was, the qemu namespace and <qemu:commandline> included.
func TestDefineDomainTap(t *testing.T) {
	in := tapDomain(t)
	res, err := DefineDomain(Input{DomainXML: []byte(in), VMI: readTestdata(t, "vmi.json")}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	out := string(res.DomainXML)
	t.Logf("result:\n%s", out)
	if outsideInterfaces(out) != outsideInterfaces(in) {
		t.Errorf("bytes outside the interface changed")
	}
	d, x := ifaceOf(t, res.DomainXML, "ua-default")
	if x.Source == nil || x.Source.Ethernet == nil || x.Target == nil || x.Target.Dev != "tap37a8eec1ce1" || x.Target.Managed != "no" {
		t.Errorf("the interface is no longer ethernet on tap37a8eec1ce1 managed='no': %+v %+v", x.Source, x.Target)
	}
	if x.MAC == nil || x.MAC.Address != "02:00:00:00:00:01" || x.ACPI == nil || x.ACPI.Index != 3 ||
		x.Address == nil || x.Address.PCI == nil || *x.Address.PCI.Bus != 1 || x.ROM == nil || x.ROM.Enabled != "no" ||
		x.Model == nil || x.Model.Type != "virtio-non-transitional" {
		t.Errorf("MAC, ACPI index, PCI address, ROM or model lost: %s", out)
	}
	if x.Driver == nil || x.Driver.Name != "vhost" || x.Driver.Queues != 4 || x.Driver.Host != nil || x.Driver.Guest != nil {
		t.Errorf("driver %+v: want name vhost, queues 4 and no offload attribute (no plan)", x.Driver)
	}
	if d.QEMUCommandline == nil || len(d.QEMUCommandline.Args) != 2 || d.QEMUCommandline.Args[1].Value != "device.ua-default.x-netctl-test=1" ||
		len(d.QEMUCommandline.Envs) != 1 {
		t.Errorf("<qemu:commandline> lost: %+v", d.QEMUCommandline)
	}
	if !strings.Contains(out, `xmlns:qemu="http://libvirt.org/schemas/domain/qemu/1.0"`) {
		t.Errorf("the qemu namespace declaration is gone")
	}
	if len(res.Interfaces) != 1 || res.Interfaces[0].Kind != "tap" || res.Interfaces[0].Queues != 4 ||
		!strings.Contains(res.Interfaces[0].After, `name="vhost"`) || !strings.Contains(res.Interfaces[0].Before, `queues="4"`) {
		t.Errorf("report %+v", res.Interfaces)
	}
}

// TestDefineDomainKubeVirtFixtureVerbatim: KubeVirt's own fixture as it
// is (an ethernet interface with no MAC and no target) with a VMI
// without multiqueue: the interface gets <driver name='vhost'/> and
// nothing else changes.
func TestDefineDomainKubeVirtFixtureVerbatim(t *testing.T) {
	in := readTestdata(t, "domain.xml")
	vmi := strings.Replace(string(readTestdata(t, "vmi.json")), `"networkInterfaceMultiqueue":true`, `"networkInterfaceMultiqueue":false`, 1)
	res, err := DefineDomain(Input{DomainXML: in, VMI: []byte(vmi)}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if outsideInterfaces(string(res.DomainXML)) != outsideInterfaces(string(in)) {
		t.Errorf("bytes outside the interface changed")
	}
	_, x := ifaceOf(t, res.DomainXML, "ua-default")
	if x.Driver == nil || x.Driver.Name != "vhost" || x.Driver.Queues != 0 {
		t.Errorf("driver %+v: want name vhost and no queues", x.Driver)
	}
}

// TestDefineDomainPlan: with the plan of the 6.1 and 6.12 test VMs the
// <driver> carries every offload attribute, on for what the plan offers
// and off for the rest, and what <driver> cannot say (queue_reset: 6.1's
// vhost-net lacks RING_RESET) goes into <qemu:override> on alias
// ua-default, in the same <domain> as the <qemu:commandline>.
func TestDefineDomainPlan(t *testing.T) {
	res0, _ := pool.Of(t, "probe-6.1.json", "probe-6.12.json")
	pj, err := json.Marshal(res0)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := ParsePlan(pj)
	if err != nil {
		t.Fatal(err)
	}
	in := tapDomain(t)
	res, err := DefineDomain(Input{DomainXML: []byte(in), VMI: readTestdata(t, "vmi.json")}, Config{Plan: plan})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("result:\n%s", res.DomainXML)
	d, x := ifaceOf(t, res.DomainXML, "ua-default")
	if x.Driver == nil || x.Driver.Name != "vhost" || x.Driver.Queues != 4 || x.Driver.Host == nil || x.Driver.Guest == nil ||
		x.Driver.Host.CSum != "on" || x.Driver.Host.TSO4 != "on" || x.Driver.Guest.CSum != "on" || x.Driver.Host.UFO == "" || x.Driver.EventIDX == "" {
		t.Errorf("driver %+v host %+v guest %+v: want vhost, 4 queues and every offload pinned", x.Driver, x.Driver.Host, x.Driver.Guest)
	}
	if d.QEMUOverride == nil || len(d.QEMUOverride.Devices) != 1 || d.QEMUOverride.Devices[0].Alias != "ua-default" {
		t.Fatalf("<qemu:override> %+v: want one device ua-default", d.QEMUOverride)
	}
	props := map[string]string{}
	for _, p := range d.QEMUOverride.Devices[0].Frontend.Properties {
		props[p.Name] = p.Type + "/" + p.Value
	}
	if props["queue_reset"] != "bool/false" {
		t.Errorf("override %v: want queue_reset bool/false", props)
	}
	if d.QEMUCommandline == nil || len(d.QEMUCommandline.Args) != 2 {
		t.Errorf("<qemu:commandline> lost: %+v", d.QEMUCommandline)
	}
	if r := res.Interfaces[0]; !r.Override["queue_reset"] == false || r.Override["queue_reset"] {
		t.Errorf("report override %v", r.Override)
	}
}

// TestDefineDomainVDPA: where the network-info file (as KubeVirt mounts
// it with downwardAPI: device-info) names a vhost-vdpa device for the
// interface's network, the interface becomes type='vdpa' on that device,
// without a tap target or a driver name, keeping MAC, PCI address, ACPI
// index, model, alias and ROM.
func TestDefineDomainVDPA(t *testing.T) {
	ni := `{"interfaces":[{"network":"default","deviceInfo":{"type":"vdpa","version":"1.1.0","vdpa":{"parent-device":"vdpa0","driver":"vhost","path":"/dev/vhost-vdpa-0"}},"mac":"02:00:00:00:00:01","mtu":1500}]}`
	in := tapDomain(t)
	res, err := DefineDomain(Input{DomainXML: []byte(in), VMI: readTestdata(t, "vmi.json"), NetworkInfo: []byte(ni)}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("result:\n%s", res.DomainXML)
	if outsideInterfaces(string(res.DomainXML)) != outsideInterfaces(in) {
		t.Errorf("bytes outside the interface changed")
	}
	_, x := ifaceOf(t, res.DomainXML, "ua-default")
	if x.Source == nil || x.Source.VDPA == nil || x.Source.VDPA.Device != "/dev/vhost-vdpa-0" || x.Target != nil {
		t.Errorf("source %+v target %+v: want vdpa on /dev/vhost-vdpa-0 and no target", x.Source, x.Target)
	}
	if x.MAC == nil || x.MAC.Address != "02:00:00:00:00:01" || x.ACPI == nil || x.ACPI.Index != 3 || x.Address == nil || x.Address.PCI == nil ||
		x.ROM == nil || x.Model == nil || x.Model.Type != "virtio-non-transitional" {
		t.Errorf("MAC, ACPI index, PCI address, ROM or model lost")
	}
	if x.Driver != nil && x.Driver.Name != "" {
		t.Errorf("a vdpa interface with driver name %q", x.Driver.Name)
	}
	if r := res.Interfaces[0]; r.Kind != "vdpa" || r.Device != "/dev/vhost-vdpa-0" {
		t.Errorf("report %+v", r)
	}
}

// TestDefineDomainLeavesOthersAlone: a VMI whose interface has another
// binding (passt), or none, gets its domain back byte for byte.
func TestDefineDomainLeavesOthersAlone(t *testing.T) {
	in := []byte(tapDomain(t))
	for _, vmi := range []string{
		strings.Replace(string(readTestdata(t, "vmi.json")), `"binding":{"name":"netctl"}`, `"binding":{"name":"passt"}`, 1),
		strings.Replace(string(readTestdata(t, "vmi.json")), `"binding":{"name":"netctl"},`, `"masquerade":{},`, 1),
	} {
		res, err := DefineDomain(Input{DomainXML: in, VMI: []byte(vmi)}, Config{})
		if err != nil {
			t.Fatal(err)
		}
		if string(res.DomainXML) != string(in) || len(res.Interfaces) != 0 {
			t.Errorf("a VMI without netctl's binding changed the domain")
		}
	}
	// A binding registered under another name (NETWORK_BINDING_PLUGIN_NAME).
	vmi := strings.Replace(string(readTestdata(t, "vmi.json")), `"binding":{"name":"netctl"}`, `"binding":{"name":"fastnet"}`, 1)
	res, err := DefineDomain(Input{DomainXML: in, VMI: []byte(vmi)}, Config{BindingName: "fastnet"})
	if err != nil || len(res.Interfaces) != 1 {
		t.Errorf("binding name fastnet: %v %+v", err, res.Interfaces)
	}
}

// TestDefineDomainRefuses: what DefineDomain cannot do is an error
// wrapping errs.ErrInvalid that says what to do, never a panic.
func TestDefineDomainRefuses(t *testing.T) {
	vmi := readTestdata(t, "vmi.json")
	dom := []byte(tapDomain(t))
	cases := []struct {
		name string
		in   Input
		want string
	}{
		{"no interface with the alias", Input{DomainXML: []byte(strings.Replace(string(dom), "ua-default", "ua-other", 1)), VMI: vmi}, "domainAttachmentType: tap"},
		{"vdpa path not a vhost-vdpa device", Input{DomainXML: dom, VMI: vmi, NetworkInfo: []byte(`{"interfaces":[{"network":"default","deviceInfo":{"type":"vdpa","vdpa":{"path":"/etc/shadow"}}}]}`)}, "no /dev/vhost-vdpa-N"},
		{"network-info not JSON", Input{DomainXML: dom, VMI: vmi, NetworkInfo: []byte(`{`)}, "network-info"},
		{"VMI not JSON", Input{DomainXML: dom, VMI: []byte(`[`)}, "VMI JSON"},
		{"VMI over its bound", Input{DomainXML: dom, VMI: make([]byte, MaxVMI+1)}, "over"},
		{"domain over its bound", Input{DomainXML: make([]byte, libvirtdom.MaxXML+1), VMI: vmi}, "over"},
		{"domain not XML", Input{DomainXML: []byte("<domain>"), VMI: vmi}, "domain XML"},
	}
	for _, c := range cases {
		_, err := DefineDomain(c.in, Config{})
		if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrInvalid saying %q", c.name, err, c.want)
		}
	}
}

// TestQueues: the queue count as KubeVirt counts vCPUs, capped at 256.
func TestQueues(t *testing.T) {
	tr := true
	for _, c := range []struct {
		cpu         string
		mq          *bool
		domainVCPUs uint
		want        int
	}{
		{`{"cores":2,"sockets":2}`, &tr, 1, 4},
		{`{"cores":2,"sockets":2,"threads":2}`, &tr, 1, 8},
		{``, &tr, 6, 6},
		{`{}`, &tr, 3, 3},
		{``, &tr, 0, 1},
		{`{"cores":4294967295,"sockets":4294967295,"threads":4294967295}`, &tr, 1, MultiQueueMaxQueues},
		{`{"cores":4}`, nil, 1, 0},
	} {
		var v vmi
		if c.cpu != "" {
			if err := json.Unmarshal([]byte(`{"spec":{"domain":{"cpu":`+c.cpu+`}}}`), &v); err != nil {
				t.Fatal(err)
			}
		}
		v.Spec.Domain.Devices.NetworkInterfaceMultiQueue = c.mq
		if got := v.queues(c.domainVCPUs); got != c.want {
			t.Errorf("cpu %s mq %v vcpus %d: %d queues, want %d", c.cpu, c.mq, c.domainVCPUs, got, c.want)
		}
	}
}

// TestDefineDomainPlanOlderQEMU: with virt-launcher's QEMU given as 7.2
// (no USO properties before 8.2), the plan's USO properties (the test
// VMs' probes saw a newer QEMU) are left out and the report says why;
// queue_reset=false stays. Without a version they are written.
func TestDefineDomainPlanOlderQEMU(t *testing.T) {
	res0, _ := pool.Of(t, "probe-6.1.json", "probe-6.12.json")
	pj, err := json.Marshal(res0)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := ParsePlan(pj)
	if err != nil {
		t.Fatal(err)
	}
	in := Input{DomainXML: []byte(tapDomain(t)), VMI: readTestdata(t, "vmi.json")}
	res, err := DefineDomain(in, Config{Plan: plan, QEMU: "7.2.22"})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Interfaces[0]
	if _, uso := r.Override["guest_uso4"]; uso || r.Override["queue_reset"] || len(r.Override) != 1 {
		t.Errorf("override for QEMU 7.2: %v, want queue_reset=false only", r.Override)
	}
	if !strings.Contains(strings.Join(r.Unexpressed, "\n"), "guest_uso4=off left out: virt-launcher's QEMU 7.2.22 has no such property") {
		t.Errorf("notes %q", r.Unexpressed)
	}
	res, err = DefineDomain(in, Config{Plan: plan})
	if err != nil {
		t.Fatal(err)
	}
	if _, uso := res.Interfaces[0].Override["guest_uso4"]; !uso {
		t.Errorf("without a QEMU version the USO properties are not written: %v", res.Interfaces[0].Override)
	}
}
