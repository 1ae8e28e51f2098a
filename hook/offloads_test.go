package hook

import (
	"bytes"
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/policy/host"
	"github.com/netctl/netctl/virtio"
)

const (
	allHostBits  = virtio.NetCsum | virtio.NetGSO | virtio.NetHostTSO4 | virtio.NetHostTSO6 | virtio.NetHostECN | virtio.NetHostUFO
	allGuestBits = virtio.NetGuestCsum | virtio.NetGuestTSO4 | virtio.NetGuestTSO6 | virtio.NetGuestECN | virtio.NetGuestUFO
)

// asTap makes libvirt's type='user' sample interface a tap netctl manages.
func asTap(b []byte) []byte {
	return bytes.Replace(b, []byte("<interface type='user'>"), []byte("<interface type='ethernet'>\n      <target dev='tapoff0' managed='no'/>"), 1)
}

// TestParseForcedSamples: libvirt's own sample turns every attribute off;
// the tuning guides' block turns every one on.
func TestParseForcedSamples(t *testing.T) {
	all := cfgWith(t, `{"manage": "all"}`)
	p, err := ParsePlan(sample(t, "libvirt-disable-offloads.xml"), all)
	if err != nil || len(p.Interfaces) != 0 {
		t.Fatalf("libvirt's type='user' sample: %+v, %v (netctl does not manage it)", p, err)
	}
	p, err = ParsePlan(asTap(sample(t, "libvirt-disable-offloads.xml")), all)
	if err != nil || len(p.Interfaces) != 1 {
		t.Fatalf("as a tap: %+v, %v", p, err)
	}
	if f := p.Interfaces[0].Force; f.On != 0 || f.Off != allHostBits|allGuestBits|virtio.NetMrgRxbuf {
		t.Errorf("forced on %v, off %v", f.On, f.Off)
	}
	if a := p.Interfaces[0].Force.Attrs(); len(a) != 12 || a[0] != "<host csum='off'/>" || a[11] != "<guest ufo='off'/>" {
		t.Errorf("attrs %q", a)
	}
	p, err = ParsePlan(sample(t, "netctl-offloads.xml"), DefaultConfig())
	if err != nil || len(p.Interfaces) != 1 {
		t.Fatalf("netctl-offloads.xml: %+v, %v", p, err)
	}
	if it := p.Interfaces[0]; it.Force.On != allHostBits|allGuestBits || it.Force.Off != 0 || it.Driver != "vhost" || it.Queues != 2 {
		t.Errorf("netctl-offloads.xml: %+v", it)
	}
}

// TestParseForcedRefuses: a bit forced on whose prerequisite the domain
// forces off is one line naming both attributes; so is a bad value. A
// prerequisite with an alternative left is fine.
func TestParseForcedRefuses(t *testing.T) {
	good := string(sample(t, "netctl-offloads.xml"))
	drv := "<host csum='on' gso='on' tso4='on' tso6='on' ecn='on' ufo='on'/>\n        <guest csum='on' tso4='on' tso6='on' ecn='on' ufo='on'/>"
	with := func(d string) string { return strings.Replace(good, drv, d, 1) }
	cases := []struct{ name, xml, want string }{
		{"guest tso4 without guest csum", with("<guest csum='off' tso4='on'/>"),
			"<guest tso4='on'/> needs <guest csum='on'/>, which the domain forces off with <guest csum='off'/> (virtio 1.3, 5.1.3.1: GUEST_TSO4 requires GUEST_CSUM): drop one of them"},
		{"host tso6 without csum", with("<host csum='off' tso6='on'/>"), "<host tso6='on'/> needs <host csum='on'/>"},
		{"host ufo without csum", with("<host csum='off' ufo='on'/>"), "<host ufo='on'/> needs <host csum='on'/>"},
		{"guest ecn without tso", with("<guest csum='on' tso4='off' tso6='off' ecn='on'/>"),
			"<guest ecn='on'/> needs <guest tso4='on'/> or <guest tso6='on'/>, which the domain forces off with <guest tso4='off'/> and <guest tso6='off'/>"},
		{"bad value", with("<host tso4='yes'/>"), `<driver><host tso4="yes"/>: use 'on' or 'off'`},
		{"driver name", strings.Replace(good, "name='vhost'", "name='kvm'", 1), "use 'vhost' or 'qemu'"},
		{"qemu and vhost-net", strings.Replace(strings.Replace(good, "name='vhost'", "name='qemu'", 1), `profile="throughput"`, `backend="vhost-net"`, 1), "drop one"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParsePlan([]byte(c.xml), DefaultConfig())
			if !errors.Is(err, errs.ErrInvalid) || strings.ContainsAny(err.Error(), "\n\r") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one line wrapping ErrInvalid with %q", err, c.want)
			}
		})
	}
	if p, err := ParsePlan([]byte(with("<guest csum='on' tso4='off' ecn='on'/>")), DefaultConfig()); err != nil || p.Interfaces[0].Force.On != virtio.NetGuestCsum|virtio.NetGuestECN {
		t.Errorf("ecn with tso6 left to the backend: %+v, %v", p, err)
	}
}

// prepareXML runs prepare on xml with the fake; it returns the error and
// checks that a refusal left nothing.
func prepareXML(t *testing.T, f *fakeDevices, domain, xml string) (*Hook, error) {
	t.Helper()
	h, _, vd := newTestHook(t, f)
	xml = strings.ReplaceAll(xml, "/run/netctl/vdpa", vd)
	before := f.snapshot()
	_, err := h.Run(context.Background(), domain, "prepare", "begin", strings.NewReader(xml))
	if err != nil {
		if strings.ContainsAny(err.Error(), "\n\r") {
			t.Errorf("not one line: %q", err)
		}
		if got := f.snapshot(); got != before {
			t.Errorf("a refused prepare changed devices: %s -> %s", before, got)
		}
		if es, _ := os.ReadDir(vd); len(es) != 0 {
			t.Errorf("a refused prepare left %v in %s", es, vd)
		}
		if ds, _, _ := h.Store.ListDomains(); len(ds) != 0 {
			t.Errorf("a refused prepare left a record: %+v", ds[0])
		}
	}
	return h, err
}

// TestPrepareForcedOffloads: what the domain forces goes through
// policy.Decide with the host's probe: carried bits pass and are
// recorded, a bit the backend cannot carry refuses the start naming the
// attribute and policy's reason, 'off' is honoured as a disable.
func TestPrepareForcedOffloads(t *testing.T) {
	good := string(sample(t, "netctl-offloads.xml"))
	drv := "<host csum='on' gso='on' tso4='on' tso6='on' ecn='on' ufo='on'/>\n        <guest csum='on' tso4='on' tso6='on' ecn='on' ufo='on'/>"

	t.Run("all on, carried", func(t *testing.T) {
		f := newFake(t)
		h, err := prepareXML(t, f, "netctl-offloads", good)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := h.Store.LoadDomain("netctl-offloads")
		if err != nil || len(rec.Interfaces) != 1 {
			t.Fatalf("%+v %v", rec, err)
		}
		hi := rec.Interfaces[0]
		if hi.Backend != "vhost-net" || hi.Profile != "throughput" || len(hi.Forced) != 11 || hi.Forced[0] != "<host csum='on'/>" {
			t.Errorf("record %+v", hi)
		}
		for _, b := range (allHostBits&^virtio.NetGSO | allGuestBits).Bits() {
			if !slices.Contains(hi.Offer, virtio.BitName(b)) {
				t.Errorf("%s forced on but not offered: %v", virtio.BitName(b), hi.Offer)
			}
		}
	})

	t.Run("tun lacks tso4", func(t *testing.T) {
		f := newFake(t)
		f.desc.Kernel = "2.6.18-old"
		f.desc.Tap.Offloads = []string{"csum"}
		_, err := prepareXML(t, f, "netctl-offloads", good)
		t.Logf("refusal: %v", err)
		want := "domain netctl-offloads: interface 52:54:00:aa:01:01: <driver><guest tso4='on'/> (GUEST_TSO4) cannot be honoured: tun on 2.6.18-old refuses TUN_F_TSO4"
		if !errors.Is(err, errs.ErrNotSupported) || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "drop the attribute") ||
			!strings.Contains(err.Error(), "<guest ufo='on'/> (GUEST_UFO) cannot be honoured: tun on 2.6.18-old refuses TUN_F_UFO") {
			t.Errorf("error %v\nwant %q...", err, want)
		}
	})

	t.Run("off is a disable", func(t *testing.T) {
		f := newFake(t)
		h, err := prepareXML(t, f, "netctl-offloads", strings.Replace(good, drv, "<guest csum='off'/><host mrg_rxbuf='off'/>", 1))
		if err != nil {
			t.Fatal(err)
		}
		rec, _ := h.Store.LoadDomain("netctl-offloads")
		hi := rec.Interfaces[0]
		if slices.Contains(hi.Offer, "GUEST_CSUM") || slices.Contains(hi.Offer, "GUEST_TSO4") || slices.Contains(hi.Offer, "MRG_RXBUF") ||
			hi.Dropped["GUEST_CSUM"] != "disabled by request" || !strings.Contains(hi.Dropped["GUEST_TSO4"], "needs GUEST_CSUM") {
			t.Errorf("record %+v", hi)
		}
	})

	t.Run("vhost-net missing", func(t *testing.T) {
		f := newFake(t)
		f.desc.VhostNet = vhostNetMissing
		_, err := prepareXML(t, f, "netctl-offloads", good)
		if !errors.Is(err, errs.ErrNotAvailable) || !strings.Contains(err.Error(), "policy: backend vhost-net is not available here: /dev/vhost-net: no such file or directory: this kernel has no vhost-net loaded; run 'modprobe vhost_net'") {
			t.Errorf("error %v", err)
		}
	})

	t.Run("no driver name: the chain", func(t *testing.T) {
		f := newFake(t)
		f.desc.VhostNet = vhostNetMissing
		h, err := prepareXML(t, f, "netctl-offloads", strings.Replace(good, "name='vhost' ", "", 1))
		if err != nil {
			t.Fatal(err)
		}
		if rec, _ := h.Store.LoadDomain("netctl-offloads"); rec.Interfaces[0].Backend != "userspace" {
			t.Errorf("record %+v", rec.Interfaces)
		}
	})

	t.Run("vdpa on a tap", func(t *testing.T) {
		f := newFake(t)
		_, err := prepareXML(t, f, "netctl-offloads", strings.Replace(strings.Replace(good, "name='vhost' ", "", 1), `profile="throughput"`, `backend="vdpa"`, 1))
		if !errors.Is(err, errs.ErrNotAvailable) || !strings.Contains(err.Error(), "policy: backend vdpa is not available here: a type='ethernet' interface is a tap, not a vdpa device: for vdpa use <interface type='vdpa'>") {
			t.Errorf("error %v", err)
		}
	})

	t.Run("unknown profile", func(t *testing.T) {
		f := newFake(t)
		_, err := prepareXML(t, f, "netctl-offloads", strings.Replace(good, `profile="throughput"`, `profile="fast"`, 1))
		if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), `interface 52:54:00:aa:01:01: policy: unknown profile "fast": use throughput, latency or compat`) {
			t.Errorf("error %v", err)
		}
	})

	t.Run("direct: macvtap lacks ufo", func(t *testing.T) {
		f := newFake(t)
		f.desc.Macvtap.Offloads = []string{"csum", "tso4", "tso6", "tso_ecn"}
		x := strings.Replace(good, "<target dev='vmofftap0' managed='no'/>", "<source dev='eth0' mode='bridge'/>", 1)
		x = strings.Replace(x, "<interface type='ethernet'>", "<interface type='direct'>", 1)
		_, err := prepareXML(t, f, "netctl-offloads", x)
		if !errors.Is(err, errs.ErrNotSupported) || !strings.Contains(err.Error(), "<guest ufo='on'/> (GUEST_UFO) cannot be honoured: macvtap on 6.1.0-fake refuses TUN_F_UFO") {
			t.Errorf("error %v", err)
		}
	})
}

// vhostNetMissing is the probe's vhost-net section on a host without it
// (this machine's words).
var vhostNetMissing = host.VhostNet{Error: "vhost-net: /dev/vhost-net: not available: no such file or directory: this kernel has no vhost-net loaded; " +
	"run 'modprobe vhost_net' (CONFIG_VHOST_NET) or use the VMM's userspace virtio-net"}

// vdpaOffloadXML is a vdpa interface forcing drv.
func vdpaOffloadXML(drv string) string {
	return `<domain type='qemu'><name>vdpaoff</name>
  <metadata><netctl:hook xmlns:netctl="http://netctl.dev/xmlns/hook/1"><netctl:interface mac="52:54:00:aa:02:01" mgmtdev="vduse"/></netctl:hook></metadata>
  <devices><interface type='vdpa'><mac address='52:54:00:aa:02:01'/><source dev='/run/netctl/vdpa/vdpaoff0'/>
    <driver>` + drv + `</driver></interface></devices></domain>`
}

// TestPrepareForcedVDPA: a vdpa device is decided once it exists; a
// forced bit it does not offer refuses the start, and the device is
// deleted again and nothing is published.
func TestPrepareForcedVDPA(t *testing.T) {
	f := newFake(t)
	h, err := prepareXML(t, f, "vdpaoff", vdpaOffloadXML("<host csum='on' tso4='on'/><guest csum='off'/>"))
	if err != nil {
		t.Fatal(err)
	}
	if rec, _ := h.Store.LoadDomain("vdpaoff"); rec.Interfaces[0].Backend != "vdpa" || slices.Contains(rec.Interfaces[0].Offer, "GUEST_CSUM") {
		t.Errorf("record %+v", rec.Interfaces)
	}
	for _, c := range []struct{ drv, want string }{
		{"<host csum='on' tso6='on'/>", "<driver><host tso6='on'/> (HOST_TSO6) cannot be honoured: vdpa device vdpaoff0 does not offer it (backend vdpa): drop the attribute (or set it to 'off'), or create the device from a management device"},
		{"<host gso='on'/>", "<host gso='on'/>: vdpa device vdpaoff0 does not offer GSO"},
	} {
		f := newFake(t)
		_, err := prepareXML(t, f, "vdpaoff", vdpaOffloadXML(c.drv))
		if !errors.Is(err, errs.ErrNotSupported) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v\nwant %q", c.drv, err, c.want)
		}
		if !slices.Contains(f.calls, "vdpa vdpaoff0") || !slices.Contains(f.calls, "delvdpa vdpaoff0") {
			t.Errorf("%s: the device was not created and deleted: %v", c.drv, f.calls)
		}
	}
}
