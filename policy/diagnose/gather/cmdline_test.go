package gather

import (
	"encoding/json"
	"maps"
	"os"
	"strings"
	"testing"

	"github.com/netctl/netctl/policy/diagnose"

	"github.com/netctl/netctl/internal/fuzzalloc"
)

// realDefaults is QEMU 7.2's device-list-properties reply for
// virtio-net-pci (Debian 1:7.2+dfsg-7+deb12u18).
func realDefaults(t testing.TB) []qomProperty {
	b, err := os.ReadFile("../testdata/device-list-properties-virtio-net-pci-qemu-7.2.json")
	if err != nil {
		t.Fatal(err)
	}
	var r struct{ Return []qomProperty }
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r.Return
}

func TestDeviceDefaults(t *testing.T) {
	d := deviceDefaults(realDefaults(t))
	for p, want := range map[string]bool{"queue_reset": true, "event_idx": true, "mrg_rxbuf": true, "guest_tso4": true, "csum": true,
		"mq": false, "rss": false, "hash": false, "packed": false, "iommu_platform": false} {
		if got, ok := d[p]; !ok || got != want {
			t.Errorf("%s: %v (present %v), want %v", p, got, ok, want)
		}
	}
	if _, ok := d["guest_uso4"]; ok {
		t.Error("QEMU 7.2 has no guest_uso4, but a default was read")
	}
	if _, ok := d["x-pcie-pm-init"]; ok {
		t.Error("a property that is no feature bit")
	}
}

// cmdline joins arguments as /proc/PID/cmdline holds them.
func cmdline(args ...string) []byte { return []byte(strings.Join(args, "\x00") + "\x00") }

// The nested guest's QEMU (shared/docs/real-vmm-recipes.md, part 2) and
// libvirt's JSON form.
var (
	nestedCmdline = cmdline("qemu-system-x86_64", "-m", "256", "-nodefaults", "-machine", "pc",
		"-netdev", "tap,id=n0,ifname=tap0,script=no,downscript=no,vhost=on",
		"-device", "virtio-net-pci,netdev=n0,id=nic0,mac=52:54:00:00:00:02",
		"-netdev", "tap,id=n1,fd=3,vhost=on,vhostfd=4",
		"-device", "virtio-net-pci,netdev=n1,id=nic1,mac=52:54:00:00:00:06,guest_tso4=off,guest_tso6=off,romfile=a,,b",
		"-device", "driver=virtio-net-pci,netdev=n2,id=nic2,mrg_rxbuf=off,queue_reset=on",
		"-qmp", "unix:/run/l2/qmp.sock,server=on,wait=off")
	libvirtCmdline = cmdline("/usr/bin/qemu-system-x86_64", "-name", "guest=vm1",
		"-netdev", `{"type":"tap","fd":"27","vhost":true,"vhostfd":"29","id":"hostnet0"}`,
		"-device", `{"driver":"virtio-net-pci","host_tso4":false,"netdev":"hostnet0","id":"net0","mac":"52:54:00:6b:3c:58","bus":"pci.1","addr":"0x0"}`)
)

func TestDeviceOption(t *testing.T) {
	for _, c := range []struct {
		name   string
		in     []byte
		id     string
		driver string
		props  map[string]string
		found  bool
	}{
		{"defaults", nestedCmdline, "nic0", "virtio-net-pci", map[string]string{}, true},
		{"guest TSO off", nestedCmdline, "nic1", "virtio-net-pci", map[string]string{"guest_tso4": "off", "guest_tso6": "off"}, true},
		{"driver=", nestedCmdline, "nic2", "virtio-net-pci", map[string]string{"mrg_rxbuf": "off", "queue_reset": "on"}, true},
		{"hot-plugged", nestedCmdline, "nic9", "", nil, false},
		{"libvirt JSON", libvirtCmdline, "net0", "virtio-net-pci", map[string]string{"host_tso4": "false"}, true},
		{"-device last, no value", cmdline("qemu", "-device"), "nic0", "", nil, false},
		{"empty", nil, "nic0", "", nil, false},
	} {
		driver, props, found, err := deviceOption(c.in, c.id)
		if err != nil || driver != c.driver || found != c.found || !maps.Equal(props, c.props) || (c.found && props == nil) {
			t.Errorf("%s: %q %v %v %v, want %q %v %v", c.name, driver, props, found, err, c.driver, c.props, c.found)
		}
	}
	if _, _, _, err := deviceOption(cmdline("qemu", "-device", `{"driver":`), "x"); err == nil {
		t.Error("broken JSON: no error")
	}
	if _, _, _, err := deviceOption(cmdline("qemu", "-device", strings.Repeat("a=b,", maxDeviceOptions+2)), "x"); err == nil {
		t.Error("too many options: no error")
	}
	if _, _, _, err := deviceOption(make([]byte, maxCmdline+1), "x"); err == nil {
		t.Error("too long: no error")
	}
}

// TestDeviceOptionNested: the command line of the nested QEMU that ran
// four vhost=on NICs on 6.12 (issue 11's end-to-end test; the arguments
// were saved space-separated, which splits only -append's value).
func TestDeviceOptionNested(t *testing.T) {
	b, err := os.ReadFile("testdata/nested-6.12-qemu-cmdline.bin")
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]map[string]string{
		"nic0": {}, "nic1": {"guest_tso4": "off", "guest_tso6": "off"}, "nic2": {"mrg_rxbuf": "off"}, "nic3": {},
	} {
		driver, props, found, err := deviceOption(b, id)
		if err != nil || !found || driver != "virtio-net-pci" || !maps.Equal(props, want) {
			t.Errorf("%s: %q %v %v %v, want %v", id, driver, props, found, err, want)
		}
	}
}

// FuzzDeviceOption: any command line parses without a panic, within
// bounds, and only feature properties come back.
func FuzzDeviceOption(f *testing.F) {
	f.Add(nestedCmdline, "nic1")
	f.Add(libvirtCmdline, "net0")
	f.Add(readTestdata(f, "nested-6.12-qemu-cmdline.bin"), "nic1")
	f.Add(cmdline("q", "-device", "virtio-net-pci,,id=x,id=y,,,"), "y")
	f.Fuzz(func(t *testing.T, in []byte, id string) {
		var props map[string]string
		var found bool
		var err error
		fuzzalloc.Check(t, len(in)+len(id), func() { _, props, found, err = deviceOption(in, id) })
		if err != nil && found {
			t.Fatal("found with an error")
		}
		if len(props) > maxDeviceOptions {
			t.Fatalf("%d props", len(props))
		}
		for k := range props {
			if bitOf(k) == "" {
				t.Fatalf("property %q is no feature property", k)
			}
		}
	})
}

func bitOf(p string) string {
	for _, q := range diagnose.Props() {
		if q == p {
			return q
		}
	}
	return ""
}
