package libvirtdom

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"libvirt.org/go/libvirtxml"

	"github.com/netctl/netctl/internal/errs"
)

// wantFor gives props to the interface with mac only.
func wantFor(mac string, props map[string]bool) func(*libvirtxml.DomainInterface) map[string]bool {
	return func(x *libvirtxml.DomainInterface) map[string]bool {
		if x.MAC != nil && x.MAC.Address == mac {
			return props
		}
		return nil
	}
}

// overrides reads the <qemu:override> devices of a domain as libvirtxml
// does: alias -> property -> type/value.
func overrides(t *testing.T, b []byte) map[string]map[string]string {
	t.Helper()
	dom, err := ParseDomain(b)
	if err != nil {
		t.Fatalf("the XML does not parse: %v\n%s", err, b)
	}
	out := map[string]map[string]string{}
	if dom.QEMUOverride == nil {
		return out
	}
	for _, d := range dom.QEMUOverride.Devices {
		if out[d.Alias] == nil {
			out[d.Alias] = map[string]string{}
		}
		for _, p := range d.Frontend.Properties {
			out[d.Alias][p.Name] = p.Type + "/" + p.Value
		}
	}
	return out
}

// TestOverrideAddsAliasAndOverride: an interface without an alias gets
// ua-netctl-MAC and a <qemu:override> on it, the namespace is declared
// on <domain>, and removing exactly what Override inserted gives the
// input back byte for byte; a second Override changes nothing.
func TestOverrideAddsAliasAndOverride(t *testing.T) {
	in, err := os.ReadFile(filepath.Join("testdata", "netctl-all.xml"))
	if err != nil {
		t.Fatal(err)
	}
	props := map[string]bool{"queue_reset": false, "host_uso": false}
	out, changes, err := Override(in, wantFor("52:54:00:aa:00:01", props))
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 1 || changes[0].Alias != "ua-netctl-525400aa0001" || !changes[0].Added || len(changes[0].Props) != 2 || changes[0].Kept != "" {
		t.Fatalf("changes %+v", changes)
	}
	t.Logf("%s", out)
	got := overrides(t, out)
	if got["ua-netctl-525400aa0001"]["queue_reset"] != "bool/false" || got["ua-netctl-525400aa0001"]["host_uso"] != "bool/false" || len(got) != 1 {
		t.Errorf("overrides %v", got)
	}
	dom, _ := ParseDomain(out)
	for _, x := range dom.Devices.Interfaces {
		a := Alias(&x)
		if (x.MAC.Address == "52:54:00:aa:00:01") != (a == "ua-netctl-525400aa0001") || (a != "" && x.MAC.Address != "52:54:00:aa:00:01") {
			t.Errorf("interface %s alias %q", x.MAC.Address, a)
		}
	}
	// What was inserted, and nothing else.
	s := string(out)
	s = strings.Replace(s, " xmlns:qemu='"+QEMUNamespace+"'", "", 1)
	s = strings.Replace(s, "  <alias name='ua-netctl-525400aa0001'/>\n    ", "", 1)
	i, j := strings.Index(s, "  <qemu:override>"), strings.Index(s, "</qemu:override>\n")
	if i < 0 || j < 0 {
		t.Fatalf("no <qemu:override> block:\n%s", out)
	}
	s = s[:i] + s[j+len("</qemu:override>\n"):]
	if s != string(in) {
		t.Errorf("Override changed more than it inserted:\n%s", out)
	}
	again, ch2, err := Override(out, wantFor("52:54:00:aa:00:01", props))
	if err != nil || len(ch2) != 0 || string(again) != string(out) {
		t.Errorf("a second Override: %v, %+v, same %v", err, ch2, string(again) == string(out))
	}
}

// TestOverrideIntoTheDomainsOwn: with a <qemu:override> of the user's
// on another device and the namespace under prefix q, the new device
// goes into that element with prefix q, the user's stays; a user alias
// the interface has is used, not replaced.
func TestOverrideIntoTheDomainsOwn(t *testing.T) {
	in := []byte(`<domain type='kvm' xmlns:q='` + QEMUNamespace + `'>
  <name>d</name>
  <devices>
    <interface type='ethernet'>
      <mac address='52:54:00:aa:00:01'/>
      <target dev='t0' managed='no'/>
      <model type='virtio'/>
      <alias name='ua-mine'/>
    </interface>
  </devices>
  <q:override>
    <q:device alias='ua-disk'>
      <q:frontend>
        <q:property name='x-foo' type='string' value='bar'/>
      </q:frontend>
    </q:device>
  </q:override>
</domain>
`)
	out, changes, err := Override(in, wantFor("52:54:00:aa:00:01", map[string]bool{"queue_reset": false}))
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 1 || changes[0].Alias != "ua-mine" || changes[0].Added {
		t.Fatalf("changes %+v", changes)
	}
	got := overrides(t, out)
	if got["ua-mine"]["queue_reset"] != "bool/false" || got["ua-disk"]["x-foo"] != "string/bar" {
		t.Errorf("overrides %v\n%s", got, out)
	}
	if strings.Contains(string(out), "xmlns:qemu") || strings.Count(string(out), "override>") != 2 {
		t.Errorf("want the device in the domain's own q:override and no second declaration:\n%s", out)
	}
}

// TestOverrideKeepsTheUsers: a property the domain's override sets to
// the wanted value is not written again; one it sets otherwise keeps the
// interface as it is, with the reason.
func TestOverrideKeepsTheUsers(t *testing.T) {
	doc := func(value string) []byte {
		return []byte(`<domain type='kvm' xmlns:qemu='` + QEMUNamespace + `'>
  <devices>
    <interface type='ethernet'>
      <mac address='52:54:00:aa:00:01'/>
      <alias name='ua-n'/>
    </interface>
  </devices>
  <qemu:override>
    <qemu:device alias='ua-n'>
      <qemu:frontend>
        <qemu:property name='queue_reset' type='bool' value='` + value + `'/>
      </qemu:frontend>
    </qemu:device>
  </qemu:override>
</domain>`)
	}
	in := doc("false")
	out, changes, err := Override(in, wantFor("52:54:00:aa:00:01", map[string]bool{"queue_reset": false}))
	if err != nil || len(changes) != 0 || string(out) != string(in) {
		t.Errorf("set already: %v %+v\n%s", err, changes, out)
	}
	out, changes, err = Override(in, wantFor("52:54:00:aa:00:01", map[string]bool{"queue_reset": false, "host_uso": false}))
	if err != nil || len(changes) != 1 || len(changes[0].Props) != 1 || !changes[0].Props["host_uso"] == false || overrides(t, out)["ua-n"]["host_uso"] != "bool/false" {
		t.Errorf("one set, one not: %v %+v\n%s", err, changes, out)
	}
	in = doc("true")
	out, changes, err = Override(in, wantFor("52:54:00:aa:00:01", map[string]bool{"queue_reset": false, "host_uso": false}))
	if err != nil || len(changes) != 1 || changes[0].Props != nil || !strings.Contains(changes[0].Kept, "does not rewrite") || string(out) != string(in) {
		t.Errorf("the user's own queue_reset=true: %v %+v\n%s", err, changes, out)
	}
}

// TestOverrideRefusals: what Override refuses, changing nothing.
func TestOverrideRefusals(t *testing.T) {
	for name, c := range map[string]struct{ xml, want string }{
		"live alias": {`<domain><devices><interface type='ethernet'><mac address='52:54:00:aa:00:01'/><alias name='net0'/></interface></devices></domain>`, "virsh dumpxml --inactive"},
		"empty":      {`<domain><devices><interface type='ethernet'/></devices></domain>`, "<mac"},
		"alias used": {`<domain><devices><interface type='ethernet'><mac address='52:54:00:aa:00:01'/></interface><disk><alias name='ua-netctl-525400aa0001'/></disk></devices></domain>`, "another device's"},
		"qemu taken": {`<domain xmlns:qemu='urn:x'><devices><interface type='ethernet'><mac address='52:54:00:aa:00:01'/></interface></devices></domain>`, "another namespace"},
		"not domain": {`<network/>`, "not one <domain>"},
		"broken":     {`<domain><devices>`, "domain XML"},
	} {
		want := func(x *libvirtxml.DomainInterface) map[string]bool { return map[string]bool{"queue_reset": false} }
		_, _, err := Override([]byte(c.xml), want)
		if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrInvalid saying %q", name, err, c.want)
		}
	}
}

// TestOverrideNamesTheInterfaceOfAnOrphanOverride: a <qemu:override>
// that names ua-netctl-MAC while no device has that alias (an earlier
// pin's, left behind when the interface was removed and added again:
// virsh detach-interface --config keeps the override, and libvirt
// applies an override to no device without a word) sets nothing; the
// interface with that MAC gets the alias, so the override applies to
// it, and the change says so.
func TestOverrideNamesTheInterfaceOfAnOrphanOverride(t *testing.T) {
	in := []byte(`<domain type='kvm' xmlns:qemu='` + QEMUNamespace + `'>
  <devices>
    <interface type='ethernet'>
      <mac address='52:54:00:aa:00:01'/>
      <target dev='t0' managed='no'/>
    </interface>
  </devices>
  <qemu:override>
    <qemu:device alias='ua-netctl-525400aa0001'>
      <qemu:frontend>
        <qemu:property name='queue_reset' type='bool' value='false'/>
      </qemu:frontend>
    </qemu:device>
  </qemu:override>
</domain>`)
	out, changes, err := Override(in, wantFor("52:54:00:aa:00:01", map[string]bool{"queue_reset": false}))
	if err != nil {
		t.Fatal(err)
	}
	dom, err := ParseDomain(out)
	if err != nil {
		t.Fatal(err)
	}
	if a := Alias(&dom.Devices.Interfaces[0]); a != "ua-netctl-525400aa0001" {
		t.Errorf("the interface's alias %q: the override names no device\n%s", a, out)
	}
	if len(changes) != 1 || !changes[0].Added || changes[0].Kept != "" {
		t.Errorf("changes %+v: want the alias added", changes)
	}
	if got := overrides(t, out); got["ua-netctl-525400aa0001"]["queue_reset"] != "bool/false" || strings.Count(string(out), "<qemu:device") != 1 {
		t.Errorf("overrides %v: want the one there was\n%s", got, out)
	}
}

// TestOverrideRefusesWhatWouldNotLand: a user's <q:override> that binds
// prefix qemu to another namespace inside it would put the device
// Override writes with prefix qemu outside libvirt's namespace, where
// libvirt reads nothing: Override refuses rather than report an override
// that is not there.
func TestOverrideRefusesWhatWouldNotLand(t *testing.T) {
	in := []byte(`<domain type='kvm' xmlns:qemu='` + QEMUNamespace + `'>
  <devices>
    <interface type='ethernet'>
      <mac address='52:54:00:aa:00:01'/>
      <alias name='ua-n'/>
    </interface>
  </devices>
  <q:override xmlns:q='` + QEMUNamespace + `' xmlns:qemu='urn:other'>
    <q:device alias='ua-disk'>
      <q:frontend>
        <q:property name='x' type='string' value='y'/>
      </q:frontend>
    </q:device>
  </q:override>
</domain>`)
	out, changes, err := Override(in, wantFor("52:54:00:aa:00:01", map[string]bool{"queue_reset": false}))
	if err == nil {
		got := overrides(t, out)
		t.Errorf("Override reported %+v, and libvirt reads overrides %v\n%s", changes, got, out)
	} else if !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("%v: want ErrInvalid", err)
	}
}

// TestOverrideEscapesTheAlias: a user alias with a character XML escapes
// (written &amp; in the definition) is written escaped in the override's
// alias attribute, so the result parses and the override names it.
func TestOverrideEscapesTheAlias(t *testing.T) {
	in := []byte(`<domain type='kvm'>
  <devices>
    <interface type='ethernet'>
      <mac address='52:54:00:aa:00:01'/>
      <alias name="ua-a&amp;b'c"/>
    </interface>
  </devices>
</domain>`)
	out, changes, err := Override(in, wantFor("52:54:00:aa:00:01", map[string]bool{"queue_reset": false}))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(changes) != 1 || changes[0].Alias != "ua-a&b'c" || overrides(t, out)["ua-a&b'c"]["queue_reset"] != "bool/false" {
		t.Errorf("changes %+v, overrides %v\n%s", changes, overrides(t, out), out)
	}
}

// TestOverrideOddButValid: CDATA, comments (one holding what looks like
// an end tag), character references, a self-closing <qemu:override/>
// beside the user's, and a default-namespace override: Override writes
// where libvirt reads (libvirt merges every <qemu:override>, as checked
// against libvirtd 9.0) and changes no byte around what it inserts.
func TestOverrideOddButValid(t *testing.T) {
	in := `<?xml version="1.0"?>
<!-- </domain> -->
<domain type='kvm' xmlns:qemu='` + QEMUNamespace + `'>
  <name><![CDATA[a<b>&c]]></name>
  <description>&#x3C;interface&#x3E; &amp; &lt;/domain&gt;</description>
  <devices>
    <interface type='ethernet'><!-- </interface> -->
      <mac address='52:54:00:AA:00:01'/>
      <target dev='t&#48;' managed='no'/>
      <!-- trailing -->
    </interface>
    <interface type='ethernet'>
      <mac address='52:54:00:aa:00:02'/>
    </interface>
  </devices>
  <qemu:override/>
  <override xmlns='` + QEMUNamespace + `'>
    <device alias='ua-disk'><frontend><property name='x' type='string' value='y'/></frontend></device>
  </override>
</domain>
`
	out, changes, err := Override([]byte(in), func(x *libvirtxml.DomainInterface) map[string]bool {
		return map[string]bool{"queue_reset": false}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 2 || changes[0].Alias != "ua-netctl-525400aa0001" || changes[1].Alias != "ua-netctl-525400aa0002" {
		t.Fatalf("changes %+v", changes)
	}
	got := overrides(t, out)
	if got["ua-netctl-525400aa0001"]["queue_reset"] != "bool/false" || got["ua-netctl-525400aa0002"]["queue_reset"] != "bool/false" {
		t.Errorf("overrides %v\n%s", got, out)
	}
	s := string(out)
	for _, a := range []string{"ua-netctl-525400aa0001", "ua-netctl-525400aa0002"} {
		s = strings.Replace(s, "  <alias name='"+a+"'/>\n    ", "", 1)
	}
	i, j := strings.Index(s, "  <qemu:device alias='ua-netctl-525400aa0001'>"), strings.LastIndex(s, "</qemu:device>\n  ")
	if i < 0 || j < i {
		t.Fatalf("the devices are not in the user's override:\n%s", out)
	}
	s = s[:i] + s[j+len("</qemu:device>\n  "):]
	if s != in {
		t.Errorf("Override changed more than it inserted:\n%s", out)
	}
}
