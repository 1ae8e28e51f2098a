package kubevirt

import (
	"testing"
)

// FuzzDefineDomain: whatever domain XML, VMI JSON and network-info bytes
// virt-launcher or a broken pod sends, DefineDomain never panics; what it
// returns for a VMI of the binding is XML libvirtxml reads. Seeded with
// KubeVirt's own fixture (testdata/README.md) as is and with the tap
// attachment's interface.
func FuzzDefineDomain(f *testing.F) {
	fixture := readTestdata(f, "domain.xml")
	vmi := readTestdata(f, "vmi.json")
	ni := []byte(`{"interfaces":[{"network":"default","deviceInfo":{"type":"vdpa","version":"1.1.0","vdpa":{"path":"/dev/vhost-vdpa-0"}}}]}`)
	f.Add(fixture, vmi, []byte(nil))
	f.Add([]byte(tapDomain(f)), vmi, []byte(nil))
	f.Add([]byte(tapDomain(f)), vmi, ni)
	f.Add(fixture, []byte(`{"spec":{"domain":{"devices":{"interfaces":[{"name":"default","binding":{"name":"netctl"}}]}}}}`), ni)
	f.Fuzz(func(t *testing.T, dom, vmi, ni []byte) {
		res, err := DefineDomain(Input{DomainXML: dom, VMI: vmi, NetworkInfo: ni}, Config{})
		if err != nil || len(res.Interfaces) == 0 {
			return
		}
		if _, err := DefineDomain(Input{DomainXML: res.DomainXML, VMI: vmi, NetworkInfo: ni}, Config{}); err != nil {
			t.Errorf("DefineDomain's own output is refused: %v\n%s", err, res.DomainXML)
		}
	})
}
