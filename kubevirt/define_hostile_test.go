package kubevirt

import (
	"errors"
	"strings"
	"testing"

	"github.com/netctl/netctl/internal/errs"
)

// otherInterface is an interface of another binding (passt) written with
// single quotes, a comment, self-closing tags and odd spacing.
const otherInterface = `
    <interface type='ethernet'  >
      <!-- passt's -->
      <source/>
      <target dev='tapother' managed='no'/>
      <model type='virtio-non-transitional'/>
      <driver name='qemu' queues='2'><host csum='off'/></driver>
      <mac address='02:00:00:00:00:02'/>
      <alias name='ua-passt'/>
    </interface>`

// TestDefineDomainOtherBindingsByteForByte: beside netctl's interfaces, an
// interface of another binding, however it is written, comes back byte
// for byte, and a VMI interface whose name holds XML-special characters
// is found by its escaped alias and rewritten.
func TestDefineDomainOtherBindingsByteForByte(t *testing.T) {
	dom := strings.Replace(tapDomain(t), "  <devices>\n", "  <devices>"+otherInterface+"\n", 1)
	dom = strings.Replace(dom, "</interface>\n    <channel",
		"</interface>\n    <interface type=\"ethernet\"><target dev=\"t2\" managed=\"no\"/><alias name=\"ua-a&amp;b&quot;&lt;c\"/></interface>\n    <channel", 1)
	vmi := strings.Replace(string(readTestdata(t, "vmi.json")), `"interfaces":[{"name":"default","binding":{"name":"netctl"}`,
		`"interfaces":[{"name":"passt","binding":{"name":"passt"}},{"name":"a&b\"<c","binding":{"name":"netctl"}},{"name":"default","binding":{"name":"netctl"}`, 1)
	res, err := DefineDomain(Input{DomainXML: []byte(dom), VMI: []byte(vmi)}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(res.DomainXML), otherInterface) {
		t.Errorf("the other binding's interface changed:\n%s", res.DomainXML)
	}
	_, x := ifaceOf(t, res.DomainXML, `ua-a&b"<c`)
	if x.Driver == nil || x.Driver.Name != "vhost" || x.Driver.Queues != 4 {
		t.Errorf("interface a&b\"<c: driver %+v", x.Driver)
	}
	if len(res.Interfaces) != 2 {
		t.Errorf("report %+v", res.Interfaces)
	}
}

// TestDefineDomainDuplicateAlias: a domain with two interfaces of alias
// ua-default (libvirt refuses duplicate aliases; KubeVirt never writes
// them) is refused rather than both being rewritten: the second may be
// another binding's.
func TestDefineDomainDuplicateAlias(t *testing.T) {
	dom := strings.Replace(tapDomain(t), "  <devices>\n", "  <devices>"+strings.Replace(otherInterface, "ua-passt", "ua-default", 1)+"\n", 1)
	res, err := DefineDomain(Input{DomainXML: []byte(dom), VMI: readTestdata(t, "vmi.json")}, Config{})
	if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "2 interfaces with alias") {
		t.Errorf("two interfaces ua-default: %v, want a refusal\n%s", err, res.DomainXML)
	}
}
