package libvirtd

import (
	"encoding/xml"
	"strings"
	"testing"
)

// TestDomainXML: the domain is well-formed XML with the guest's files, the
// results share, the metadata and the interfaces in it, and a name with
// markup in it is escaped.
func TestDomainXML(t *testing.T) {
	g := &Guest{Name: "a<b&c", Kernel: "/k/vmlinuz", Initrd: "/k/initrd", Share: "/k/share", Console: "/k/console.log"}
	s := g.DomainXML(`<x:m xmlns:x="urn:x"/>`, "<interface type='ethernet'><target dev='t0' managed='no'/></interface>")
	var dom struct {
		Type string `xml:"type,attr"`
		Name string `xml:"name"`
		OS   struct {
			Kernel string `xml:"kernel"`
			Initrd string `xml:"initrd"`
		} `xml:"os"`
		Metadata struct {
			Inner string `xml:",innerxml"`
		} `xml:"metadata"`
		Devices struct {
			FS struct {
				Source struct {
					Dir string `xml:"dir,attr"`
				} `xml:"source"`
				Target struct {
					Dir string `xml:"dir,attr"`
				} `xml:"target"`
			} `xml:"filesystem"`
			Ifaces []struct {
				Type string `xml:"type,attr"`
			} `xml:"interface"`
		} `xml:"devices"`
	}
	if err := xml.Unmarshal([]byte(s), &dom); err != nil {
		t.Fatalf("%v\n%s", err, s)
	}
	if dom.Type != "qemu" || dom.Name != g.Name || dom.OS.Kernel != g.Kernel || dom.OS.Initrd != g.Initrd {
		t.Errorf("domain %+v", dom)
	}
	if dom.Devices.FS.Source.Dir != g.Share || dom.Devices.FS.Target.Dir != "results" {
		t.Errorf("share %+v: want %s tagged results", dom.Devices.FS, g.Share)
	}
	if len(dom.Devices.Ifaces) != 1 || dom.Devices.Ifaces[0].Type != "ethernet" {
		t.Errorf("interfaces %+v", dom.Devices.Ifaces)
	}
	if !strings.Contains(dom.Metadata.Inner, "urn:x") || !strings.Contains(s, "<features><acpi/></features>") {
		t.Errorf("metadata or acpi missing:\n%s", s)
	}
	if strings.Contains(g.DomainXML(""), "<metadata>") {
		t.Error("an empty metadata argument still gave <metadata>")
	}
	if !strings.Contains(s, "machine='pc'>hvm") {
		t.Errorf("no machine given: want pc\n%s", s)
	}
	g.Machine, g.Devices = "q35", []string{"<controller type='pci' index='1' model='pcie-root-port'/>"}
	s = g.DomainXML("", "<interface type='ethernet'/>")
	var q struct {
		OS struct {
			Type struct {
				Machine string `xml:"machine,attr"`
			} `xml:"type"`
		} `xml:"os"`
		Devices struct {
			Controllers []struct {
				Model string `xml:"model,attr"`
			} `xml:"controller"`
			Ifaces []struct{} `xml:"interface"`
		} `xml:"devices"`
	}
	if err := xml.Unmarshal([]byte(s), &q); err != nil {
		t.Fatalf("%v\n%s", err, s)
	}
	if q.OS.Type.Machine != "q35" || len(q.Devices.Controllers) != 1 || q.Devices.Controllers[0].Model != "pcie-root-port" || len(q.Devices.Ifaces) != 1 {
		t.Errorf("machine q35 and a pcie-root-port: %+v\n%s", q, s)
	}
}
