package hook

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/policy"

	"github.com/netctl/netctl/internal/fuzzalloc"
)

func sample(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func cfgWith(t testing.TB, js string) *Config {
	t.Helper()
	c, err := ParseConfig([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestParsePlanSamples(t *testing.T) {
	all := cfgWith(t, `{"manage": "all"}`)
	def := DefaultConfig()

	// libvirt's own vdpa sample names /dev/vhost-vdpa-0: not netctl's.
	p, err := ParsePlan(sample(t, "net-vdpa.xml"), def)
	if err != nil || p.Domain != "QEMUGuest1" || len(p.Interfaces) != 0 || p.Owner != 0 {
		t.Errorf("net-vdpa.xml: %+v, %v", p, err)
	}

	// KubeVirt's pre-created tap: only with manage "all" (no metadata).
	p, err = ParsePlan(sample(t, "kubevirt-ethernet.xml"), def)
	if err != nil || len(p.Interfaces) != 0 {
		t.Errorf("kubevirt-ethernet.xml, listed: %+v, %v", p, err)
	}
	p, err = ParsePlan(sample(t, "kubevirt-ethernet.xml"), all)
	if err != nil || len(p.Interfaces) != 1 {
		t.Fatalf("kubevirt-ethernet.xml, all: %+v, %v", p, err)
	}
	if it := p.Interfaces[0]; it.Kind != KindTap || it.Name != "tap0" || it.MTU != 1480 || it.Queues != 0 || it.MAC.String() != "02:76:4a:44:00:a6" {
		t.Errorf("kubevirt tap: %+v", it)
	}

	if p, err = ParsePlan(sample(t, "netctl-all.xml"), def); err != nil || p.Owner != NoOwner {
		t.Fatalf("netctl-all.xml: taps with no tap_owner get an owner: %+v %v", p, err)
	}
	p, err = ParsePlan(sample(t, "netctl-all.xml"), cfgWith(t, `{"tap_owner": "seclabel"}`))
	if err != nil {
		t.Fatal(err)
	}
	if p.Owner != 107 || p.UUID != "3e3fce45-4f53-4fa7-bb32-11f34168b82b" || len(p.Interfaces) != 3 {
		t.Fatalf("netctl-all.xml: %+v", p)
	}
	tap, vd, dir := p.Interfaces[0], p.Interfaces[1], p.Interfaces[2]
	if tap.Kind != KindTap || tap.Name != "vm1tap0" || tap.Queues != 2 || tap.MTU != 9000 || !tap.Vhost || tap.Backend != "vhost-net" || tap.Profile != "throughput" {
		t.Errorf("tap: %+v", tap)
	}
	if vd.Kind != KindVDPA || vd.Name != "vm1vdpa0" || vd.Mgmtdev != "vduse" || vd.Queues != 2 || vd.Link != "/run/netctl/vdpa/vm1vdpa0" {
		t.Errorf("vdpa: %+v", vd)
	}
	if dir.Kind != KindDirect || dir.Name != "eth0" {
		t.Errorf("direct: %+v", dir)
	}
}

// TestParsePlanRefuses: every bad input is one line that names what to
// fix and wraps errs.ErrInvalid.
func TestParsePlanRefuses(t *testing.T) {
	good := string(sample(t, "netctl-all.xml"))
	cases := []struct{ name, xml, want string }{
		{"malformed", "<domain><name>x</name", "domain XML"},
		{"not a domain", "<network><name>x</name></network>", "domain XML"},
		{"no name", "<domain type='qemu'><metadata><netctl:hook xmlns:netctl='http://netctl.dev/xmlns/hook/1'><netctl:interface mac='52:54:00:aa:00:01'/></netctl:hook></metadata></domain>", "no <name>"},
		{"unknown element", strings.Replace(good, `<netctl:interface mac="52:54:00:aa:00:03"/>`, `<netctl:interface mac="52:54:00:aa:00:03"/><netctl:bogus/>`, 1), "unknown element <bogus>"},
		{"unknown attribute", strings.Replace(good, `profile="throughput"`, `profile="throughput" speed="fast"`, 1), "unknown attribute speed"},
		{"unknown top element", strings.Replace(good, `<other:thing`, `<netctl:config xmlns:netctl="http://netctl.dev/xmlns/hook/1"/><other:thing`, 1), "<config>"},
		{"metadata MAC not in domain", strings.Replace(good, `mac="52:54:00:aa:00:03"`, `mac="52:54:00:aa:00:09"`, 1), "52:54:00:aa:00:09"},
		{"bad MAC", strings.Replace(good, `mac="52:54:00:aa:00:03"`, `mac="nope"`, 1), "give the interface's MAC"},
		{"bad backend", strings.Replace(good, `backend="vhost-net"`, `backend="dpdk"`, 1), "use vdpa, vhost-net or userspace"},
		{"no mgmtdev", strings.Replace(good, `mgmtdev="vduse" `, ``, 1), "no management device"},
		{"vdpa elsewhere", strings.Replace(good, `/run/netctl/vdpa/vm1vdpa0`, `/dev/vhost-vdpa-3`, 1), "publishes vdpa devices as /run/netctl/vdpa/NAME"},
		{"managed tap listed", strings.Replace(good, `<target dev='vm1tap0' managed='no'/>`, `<target dev='vm1tap0'/>`, 1), "managed='no'"},
		{"queues", strings.Replace(good, `queues='2'/>`+"\n      <mtu", `queues='1000'/>`+"\n      <mtu", 1), "at most 256"},
		{"mtu", strings.Replace(good, `<mtu size='9000'/>`, `<mtu size='70000'/>`, 1), "68 to 65521"},
		{"tap name", strings.Replace(good, `vm1tap0`, `a/b`, 1), "interface name"},
		{"tap name with CR", strings.Replace(good, `vm1tap0`, `a&#13;b`, 1), "interface name"},
		{"two taps one name", strings.Replace(strings.Replace(good, `<source dev='eth0' mode='vepa'/>`, ``, 1), `<interface type='direct'>`, `<interface type='ethernet'><target dev='vm1tap0' managed='no'/>`, 1), "named by two interfaces"},
		{"userspace and vhost", strings.Replace(good, `backend="vhost-net"`, `backend="userspace"`, 1), "drop one"},
		{"dac user", strings.Replace(good, `+107:+107`, `nosuchuser-netctl:kvm`, 1), "nosuchuser-netctl"},
	}
	seclabel := cfgWith(t, `{"tap_owner": "seclabel"}`)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParsePlan([]byte(c.xml), seclabel)
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, errs.ErrInvalid) {
				t.Errorf("%v does not wrap ErrInvalid", err)
			}
			if strings.ContainsAny(err.Error(), "\n\r") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q, want one line with %q", err, c.want)
			}
		})
	}
}

// TestReadXMLBounded: ReadXML keeps at most MaxXML+1 bytes; the rest is
// drained by drainMarked, which finds netctl's marks anywhere in it, one
// split across two reads included.
func TestReadXMLBounded(t *testing.T) {
	big := strings.NewReader("<domain>" + strings.Repeat(" ", MaxXML) + "</domain>")
	b, over, err := ReadXML(big)
	if err != nil || !over || len(b) != MaxXML+1 {
		t.Fatalf("huge XML: %d bytes, over %v, %v", len(b), over, err)
	}
	if drainMarked(b, big, Marks(DefaultConfig())) {
		t.Errorf("a mark found in XML without one")
	}
	if big.Len() != 0 {
		t.Errorf("%d bytes left unread on stdin", big.Len())
	}
	for _, at := range []int{10, MaxXML - 5, MaxXML + 3, MaxXML + 64<<10 - 7, 3 * MaxXML} {
		x := []byte("<domain>" + strings.Repeat(" ", 3*MaxXML+100) + "</domain>")
		copy(x[at:], Namespace)
		r := bytes.NewReader(x)
		b, over, err := ReadXML(r)
		if err != nil || !over {
			t.Fatal(over, err)
		}
		if !drainMarked(b, r, Marks(DefaultConfig())) {
			t.Errorf("the namespace at byte %d was not found", at)
		}
	}
}

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig([]byte(`{"manage":"all","mgmtdev":"vduse","tap_owner":"107","timeout":"5s","log":"-","vdpa_dir":"/run/x"}`))
	if err != nil || c.Manage != ManageAll || c.TimeoutOrDefault().Seconds() != 5 || c.VDPADir != "/run/x" {
		t.Errorf("%+v %v", c, err)
	}
	for _, bad := range []string{`{"manage":"some"}`, `{"timeout":"1h"}`, `{"log":"rel"}`, `{"vdpa_dir":"/a/../b"}`, `{"unknown":1}`, `[]`, `{"mgmtdev":"a b"}`} {
		if _, err := ParseConfig([]byte(bad)); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("%s: %v", bad, err)
		}
	}
	d := DefaultConfig()
	if d.Manage != ManageListed || d.VDPADir != DefaultVDPADir || d.TimeoutOrDefault() != DefaultTimeout {
		t.Errorf("defaults %+v", d)
	}
}

// FuzzParsePlan: any input gives a plan or one line wrapping ErrInvalid,
// never a panic.
func FuzzParsePlan(f *testing.F) {
	for _, n := range []string{"net-vdpa.xml", "kubevirt-ethernet.xml", "netctl-all.xml", "netctl-offloads.xml", "migrate-vhost.xml"} {
		f.Add(sample(f, n))
	}
	f.Add([]byte(strings.Replace(string(sample(f, "migrate-vhost.xml")), "</domain>",
		"<qemu:override><qemu:device alias='net1'><qemu:frontend><qemu:property name='queue_reset' type='bool' value='false'/></qemu:frontend></qemu:device></qemu:override></domain>", 1)))
	f.Add(asTap(sample(f, "libvirt-disable-offloads.xml")))
	f.Add([]byte(strings.Replace(string(sample(f, "netctl-offloads.xml")), "<guest csum='on'", "<guest csum='off'", 1)))
	f.Add([]byte("<domain><name>x</name><metadata><netctl:hook xmlns:netctl='http://netctl.dev/xmlns/hook/1'><netctl:interface mac='zz'/></netctl:hook></metadata></domain>"))
	f.Add([]byte("<domain"))
	cfg := DefaultConfig()
	f.Fuzz(func(t *testing.T, b []byte) {
		var p *Plan
		var err error
		fuzzalloc.Check(t, len(b), func() { p, err = ParsePlan(b, cfg) })
		if err != nil {
			if !errors.Is(err, errs.ErrInvalid) || strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("error %q: not one line wrapping ErrInvalid", err)
			}
			return
		}
		for _, it := range p.Interfaces {
			if it.Name == "" || it.Queues > 256 || it.MTU > 65521 || it.Force.On&it.Force.Off != 0 || it.Pinned&^policyBits != 0 || it.Alias == "" {
				t.Fatalf("plan %+v", it)
			}
			for _, r := range policy.Requirements {
				if it.Force.On.Has(r.F) && r.AnyOf&^it.Force.Off == 0 {
					t.Fatalf("%v forced on with its prerequisites %v forced off, accepted", r.F, r.AnyOf)
				}
			}
		}
	})
}
