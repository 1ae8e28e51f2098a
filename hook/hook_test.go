package hook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/netctl/netctl/hostnic"
	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/policy/host"
	"github.com/netctl/netctl/state"
	"github.com/netctl/netctl/virtio"
)

// fakeDevices keeps links and vdpa devices in maps and fails the call
// named in failAt.
type fakeDevices struct {
	// Host is nil: a call of a method the hook never makes (attach's
	// open taps and fds) panics the test.
	hostnic.Host
	links  map[string]int
	vdpas  map[string]string
	ids    map[string]uint64 // vdpa device name -> identity (sysfs inode)
	marked map[string]bool   // taps CreateTap made (they carry TapAlias)
	nextID uint64
	next   int
	failAt string
	calls  []string
	devDir string
	// desc is what Probe returns; vdpaFeatures what a created vdpa
	// device offers.
	desc         *host.Description
	vdpaFeatures virtio.Features
	// vdpaMACs are the MACs of created vdpa devices' config spaces, by
	// name (none: the device has none, or took the one asked for).
	vdpaMACs map[string]net.HardwareAddr
	// tapSpecs are what CreateTap was asked for, by name.
	tapSpecs map[string]hostnic.PersistentTap
}

func (f *fakeDevices) VDPAMAC(_ context.Context, name string) (net.HardwareAddr, error) {
	return f.vdpaMACs[name], nil
}

// fakeRing is what a 6.1 vhost-net offers of the ring features.
const fakeRing = virtio.Version1 | virtio.NetMrgRxbuf | virtio.EventIdx | virtio.IndirectDesc

func newFake(t *testing.T) *fakeDevices {
	tapOffloads := []string{"csum", "tso4", "tso6", "tso_ecn", "ufo"} // tun on 6.1
	return &fakeDevices{links: map[string]int{"eth0": 2}, vdpas: map[string]string{}, ids: map[string]uint64{}, marked: map[string]bool{}, next: 10, devDir: t.TempDir(),
		desc: &host.Description{Schema: host.Schema, Hostname: "fake", Kernel: "6.1.0-fake",
			VhostNet: host.VhostNet{Available: true, Features: fakeRing.Names()},
			Tap:      host.Tap{Available: true, Offloads: tapOffloads},
			Macvtap:  host.Macvtap{Available: true, Offloads: tapOffloads},
			QEMU:     host.QEMU{Version: "7.2.22"}},
		vdpaFeatures: fakeRing | virtio.AccessPlatform | virtio.NetCsum | virtio.NetGuestCsum | virtio.NetHostTSO4 |
			virtio.NetGuestTSO4 | virtio.NetMQ | virtio.NetCtrlVQ | virtio.NetMAC}
}

func (f *fakeDevices) fail(call string) error {
	f.calls = append(f.calls, call)
	if f.failAt == call {
		return fmt.Errorf("injected failure at %s: %w", call, errs.ErrNotAvailable)
	}
	return nil
}

// MarkedTapIndex: the fake marks the taps its CreateTap made.
func (f *fakeDevices) MarkedTapIndex(name string) int {
	if !f.marked[name] {
		return 0
	}
	return f.links[name]
}

func (f *fakeDevices) CreateTap(it hostnic.PersistentTap) (int, error) {
	if err := f.fail("tap " + it.Name); err != nil {
		return 0, err
	}
	if _, ok := f.links[it.Name]; ok {
		return 0, fmt.Errorf("tap %s exists: %w", it.Name, errs.ErrConflict)
	}
	f.next++
	f.links[it.Name] = f.next
	f.marked[it.Name] = true
	if f.tapSpecs == nil {
		f.tapSpecs = map[string]hostnic.PersistentTap{}
	}
	f.tapSpecs[it.Name] = it
	return f.next, nil
}

func (f *fakeDevices) DeleteLink(name string, ifindex int) error {
	if err := f.fail("del " + name); err != nil {
		return err
	}
	if ix, ok := f.links[name]; ok && (ifindex == 0 || ix == ifindex) {
		delete(f.links, name)
	}
	return nil
}

// DeleteTap deletes only a marked tap with that ifindex.
func (f *fakeDevices) DeleteTap(name string, ifindex int) (bool, error) {
	if err := f.fail("del " + name); err != nil {
		return false, err
	}
	if ix, ok := f.links[name]; ok && f.marked[name] && ix == ifindex {
		delete(f.links, name)
		delete(f.marked, name)
		return true, nil
	}
	return false, nil
}

func (f *fakeDevices) CreateVDPA(_ context.Context, it hostnic.VDPASpec) (string, error) {
	if err := f.fail("vdpa " + it.Name); err != nil {
		return "", err
	}
	p := filepath.Join(f.devDir, "vhost-vdpa-"+it.Name)
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		return "", err
	}
	f.vdpas[it.Name] = p
	f.nextID++
	f.ids[it.Name] = f.nextID
	return p, nil
}

// recreateVDPA is someone else deleting vdpa device name and adding
// another with the name: same node, new identity.
func (f *fakeDevices) recreateVDPA(name string) {
	f.nextID++
	f.ids[name] = f.nextID
}

func (f *fakeDevices) VDPAIdentity(name string) (uint64, error) {
	if err := f.fail("vdpaid " + name); err != nil {
		return 0, err
	}
	if _, ok := f.vdpas[name]; !ok {
		return 0, fmt.Errorf("no vdpa %s: %w", name, os.ErrNotExist)
	}
	return f.ids[name], nil
}

func (f *fakeDevices) DeleteVDPA(_ context.Context, name string) error {
	if err := f.fail("delvdpa " + name); err != nil {
		return err
	}
	delete(f.vdpas, name)
	return nil
}

func (f *fakeDevices) Probe(_ context.Context, _ hostnic.ProbeSpec) (*host.Description, error) {
	if err := f.fail("probe"); err != nil {
		return nil, err
	}
	d := *f.desc
	return &d, nil
}

func (f *fakeDevices) DescribeVDPA(_ context.Context, name string) (host.VDPADevice, error) {
	if err := f.fail("describe " + name); err != nil {
		return host.VDPADevice{}, err
	}
	if _, ok := f.vdpas[name]; !ok {
		return host.VDPADevice{}, fmt.Errorf("no vdpa %s: %w", name, os.ErrNotExist)
	}
	return host.VDPADevice{Name: name, Driver: "vhost_vdpa", Features: f.vdpaFeatures.Names(), FeaturesHex: fmt.Sprintf("%#x", uint64(f.vdpaFeatures))}, nil
}

func (f *fakeDevices) DirectNotes(lower string) ([]string, error) {
	if err := f.fail("direct " + lower); err != nil {
		return nil, err
	}
	if _, ok := f.links[lower]; !ok {
		return nil, fmt.Errorf("no lower %s: %w", lower, errs.ErrInvalid)
	}
	return []string{"direct on " + lower + ": rx-gro is off"}, nil
}

func (f *fakeDevices) snapshot() string {
	var s []string
	for n, ix := range f.links {
		s = append(s, fmt.Sprintf("%s#%d", n, ix))
	}
	for n := range f.vdpas {
		s = append(s, "vdpa:"+n)
	}
	sort.Strings(s)
	return strings.Join(s, " ")
}

func newTestHook(t *testing.T, dev Devices) (*Hook, *bytes.Buffer, string) {
	t.Helper()
	dir := t.TempDir()
	st, err := state.Open(filepath.Join(dir, "run"))
	if err != nil {
		t.Fatal(err)
	}
	vd := filepath.Join(dir, "run", "vdpa")
	cfg := cfgWith(t, `{"vdpa_dir": "`+vd+`"}`)
	var log bytes.Buffer
	return &Hook{Config: cfg, Store: st, Devices: dev, Log: &log}, &log, vd
}

func allXML(t *testing.T, vdpaDir string) []byte {
	return bytes.ReplaceAll(sample(t, "netctl-all.xml"), []byte("/run/netctl/vdpa"), []byte(vdpaDir))
}

func TestPrepareReleaseFake(t *testing.T) {
	f := newFake(t)
	h, log, vd := newTestHook(t, f)
	ctx := context.Background()
	xml := allXML(t, vd)
	res, err := h.Run(ctx, "netctl-all", "prepare", "begin", bytes.NewReader(xml))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.snapshot(); got != "eth0#2 vdpa:vm1vdpa0 vm1tap0#11" {
		t.Errorf("after prepare: %s", got)
	}
	if len(res.Notes) != 4 || !strings.Contains(res.Notes[0], "rx-gro") ||
		res.Notes[1] != "interface 52:54:00:aa:00:01: backend vhost-net, profile throughput" ||
		res.Notes[3] != "interface 52:54:00:aa:00:02: backend vdpa, profile throughput" {
		t.Errorf("notes %q", res.Notes)
	}
	if !strings.Contains(log.String(), "interface 52:54:00:aa:00:01 (tap vm1tap0): backend vhost-net (vhost-net with a tap") {
		t.Errorf("the decision is not in the log:\n%s", log)
	}
	link := filepath.Join(vd, "vm1vdpa0")
	if tgt, err := os.Readlink(link); err != nil || tgt != f.vdpas["vm1vdpa0"] {
		t.Errorf("published %s -> %q, %v", link, tgt, err)
	}
	rec, err := h.Store.LoadDomain("netctl-all")
	if err != nil || rec.Status != state.DomainPrepared || len(rec.Taps) != 1 || rec.Taps[0].Owner != NoOwner || len(rec.VDPAs) != 1 || rec.VDPAs[0].Link != link {
		t.Fatalf("record %+v, %v", rec, err)
	}
	if len(rec.Interfaces) != 3 || rec.Interfaces[0].Backend != "vhost-net" || rec.Interfaces[0].Profile != "throughput" ||
		rec.Interfaces[2].Kind != "vdpa" || rec.Interfaces[2].Backend != "vdpa" || !slices.Contains(rec.Interfaces[0].Offer, "GUEST_TSO4") {
		t.Errorf("decisions in the record: %+v", rec.Interfaces)
	}
	if _, err := h.Run(ctx, "netctl-all", "started", "begin", bytes.NewReader(xml)); err != nil {
		t.Fatal(err)
	}
	if rec, _ := h.Store.LoadDomain("netctl-all"); rec.Status != state.DomainStarted {
		t.Errorf("after started: %s", rec.Status)
	}
	// reconnect without a record rebuilds it from what exists.
	h.Store.RemoveDomain("netctl-all")
	before := f.snapshot()
	res, err = h.Run(ctx, "netctl-all", "reconnect", "begin", bytes.NewReader(xml))
	if err != nil || f.snapshot() != before {
		t.Fatalf("reconnect: %v; devices %s -> %s", err, before, f.snapshot())
	}
	if len(res.Done) != 1 || !strings.Contains(res.Done[0], "rebuilt the record: 1 tap(s), 1 vdpa device(s)") {
		t.Errorf("reconnect said %v", res.Done)
	}
	rec, err = h.Store.LoadDomain("netctl-all")
	if err != nil || rec.Status != state.DomainStarted || len(rec.Taps) != 1 || rec.Taps[0].Ifindex != 11 || len(rec.VDPAs) != 1 {
		t.Fatalf("rebuilt record %+v, %v", rec, err)
	}
	// Someone else's link took a name meanwhile: release leaves it.
	f.links["vm1tap0"] = 99
	if _, err := h.Run(ctx, "netctl-all", "release", "end", nil); err != nil {
		t.Fatal(err)
	}
	if got := f.snapshot(); got != "eth0#2 vm1tap0#99" {
		t.Errorf("after release: %s", got)
	}
	if _, err := os.Lstat(link); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("release left %s", link)
	}
	if _, err := h.Run(ctx, "netctl-all", "release", "end", nil); err != nil {
		t.Errorf("second release: %v", err)
	}
	if !strings.Contains(log.String(), "nothing recorded") {
		t.Errorf("log:\n%s", log)
	}
}

// TestPrepareUndoesEveryStep injects a failure at each step: the hook
// fails, and no tap, vdpa device, symlink or record is left.
func TestPrepareUndoesEveryStep(t *testing.T) {
	steps := []string{"direct eth0", "probe", "tap vm1tap0", "vdpa vm1vdpa0", "vdpaid vm1vdpa0", "describe vm1vdpa0"}
	for _, step := range steps {
		t.Run(step, func(t *testing.T) {
			f := newFake(t)
			f.failAt = step
			h, _, vd := newTestHook(t, f)
			before := f.snapshot()
			_, err := h.Run(context.Background(), "netctl-all", "prepare", "begin", bytes.NewReader(allXML(t, vd)))
			if err == nil || !strings.Contains(err.Error(), "injected failure at "+step) {
				t.Fatalf("prepare: %v", err)
			}
			if strings.ContainsAny(err.Error(), "\n") {
				t.Errorf("not one line: %q", err)
			}
			if got := f.snapshot(); got != before {
				t.Errorf("devices %s -> %s", before, got)
			}
			if es, _ := os.ReadDir(vd); len(es) != 0 {
				t.Errorf("left in %s: %v", vd, es)
			}
			if ds, _, _ := h.Store.ListDomains(); len(ds) != 0 {
				t.Errorf("left a record: %+v", ds[0])
			}
		})
	}
	// A symlink in the way (not netctl's) refuses the start, undoing the tap.
	f := newFake(t)
	h, _, vd := newTestHook(t, f)
	os.MkdirAll(vd, 0o755)
	os.Symlink("/dev/null", filepath.Join(vd, "vm1vdpa0"))
	before := f.snapshot()
	_, err := h.Run(context.Background(), "netctl-all", "prepare", "begin", bytes.NewReader(allXML(t, vd)))
	if !errors.Is(err, errs.ErrConflict) || f.snapshot() != before {
		t.Errorf("symlink in the way: %v; %s -> %s", err, before, f.snapshot())
	}
	if tgt, _ := os.Readlink(filepath.Join(vd, "vm1vdpa0")); tgt != "/dev/null" {
		t.Errorf("the foreign symlink was changed: %q", tgt)
	}
}

// TestReleaseFailureKeepsRecord: what release could not delete stays
// recorded, and the next release finishes the job.
func TestReleaseFailureKeepsRecord(t *testing.T) {
	f := newFake(t)
	h, _, vd := newTestHook(t, f)
	ctx := context.Background()
	if _, err := h.Run(ctx, "netctl-all", "prepare", "begin", bytes.NewReader(allXML(t, vd))); err != nil {
		t.Fatal(err)
	}
	f.failAt = "delvdpa vm1vdpa0"
	if _, err := h.Run(ctx, "netctl-all", "release", "end", nil); err == nil || !strings.Contains(err.Error(), "run the release again") {
		t.Fatalf("release: %v", err)
	}
	rec, err := h.Store.LoadDomain("netctl-all")
	if err != nil || len(rec.Taps) != 0 || len(rec.VDPAs) != 1 {
		t.Fatalf("record after a half release: %+v %v", rec, err)
	}
	f.failAt = ""
	if _, err := h.Run(ctx, "netctl-all", "release", "end", nil); err != nil {
		t.Fatal(err)
	}
	if got := f.snapshot(); got != "eth0#2" {
		t.Errorf("left %s", got)
	}
}

// TestRunMismatchAndIgnored: the XML must be the named domain; other
// operations do nothing and do not read stdin.
func TestRunMismatchAndIgnored(t *testing.T) {
	f := newFake(t)
	h, _, vd := newTestHook(t, f)
	if _, err := h.Run(context.Background(), "other", "prepare", "begin", bytes.NewReader(allXML(t, vd))); !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("mismatch: %v", err)
	}
	for _, op := range []string{"start begin", "stopped end", "migrate begin", "restore begin", "attach begin"} {
		o, s, _ := strings.Cut(op, " ")
		if _, err := h.Run(context.Background(), "x", o, s, nil); err != nil {
			t.Errorf("%s: %v", op, err)
		}
	}
	if !slices.Equal(f.calls, nil) {
		t.Errorf("calls %v", f.calls)
	}
}

// TestPrepareAfterUnreleasedStart: a record that an earlier start left
// (libvirtd died before release) is released before the new prepare, so
// the devices are made afresh and nothing is doubled.
func TestPrepareAfterUnreleasedStart(t *testing.T) {
	f := newFake(t)
	h, log, vd := newTestHook(t, f)
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		if _, err := h.Run(ctx, "netctl-all", "prepare", "begin", bytes.NewReader(allXML(t, vd))); err != nil {
			t.Fatalf("prepare %d: %v", i, err)
		}
	}
	if got := f.snapshot(); got != "eth0#2 vdpa:vm1vdpa0 vm1tap0#12" {
		t.Errorf("after two prepares: %s", got)
	}
	rec, err := h.Store.LoadDomain("netctl-all")
	if err != nil || len(rec.Taps) != 1 || rec.Taps[0].Ifindex != 12 || len(rec.VDPAs) != 1 {
		t.Errorf("record %+v %v", rec, err)
	}
	if !strings.Contains(log.String(), "was not released; releasing it first") {
		t.Errorf("log:\n%s", log)
	}
}

// TestReleaseLeavesRecreatedVDPA: release deletes a vdpa device only if
// it is still the one prepare created. One that someone deleted and
// re-created under the same name meanwhile (another identity) is left
// alone and said so; one that is gone is no error; the record goes.
func TestReleaseLeavesRecreatedVDPA(t *testing.T) {
	f := newFake(t)
	h, log, vd := newTestHook(t, f)
	ctx := context.Background()
	if _, err := h.Run(ctx, "netctl-all", "prepare", "begin", bytes.NewReader(allXML(t, vd))); err != nil {
		t.Fatal(err)
	}
	// Someone deletes vm1vdpa0 and makes their own with the name.
	f.recreateVDPA("vm1vdpa0")
	res, err := h.Run(ctx, "netctl-all", "release", "end", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.snapshot(); got != "eth0#2 vdpa:vm1vdpa0" {
		t.Errorf("after release: %s; want the re-created vdpa device left", got)
	}
	if !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, "not the device netctl created") }) {
		t.Errorf("release notes %q; want one saying vm1vdpa0 was left alone", res.Notes)
	}
	if _, err := h.Store.LoadDomain("netctl-all"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("record after release: %v", err)
	}
	if !strings.Contains(log.String(), "not the device netctl created") {
		t.Errorf("log:\n%s", log)
	}

	// Gone by release: nothing to delete, no error.
	delete(f.vdpas, "vm1vdpa0")
	if _, err := h.Run(ctx, "netctl-all", "prepare", "begin", bytes.NewReader(allXML(t, vd))); err != nil {
		t.Fatal(err)
	}
	delete(f.vdpas, "vm1vdpa0")
	if _, err := h.Run(ctx, "netctl-all", "release", "end", nil); err != nil {
		t.Fatalf("release of a vdpa device someone deleted: %v", err)
	}
	if slices.Contains(f.calls, "delvdpa vm1vdpa0") {
		t.Errorf("calls %v: release deleted a vdpa device by a name netctl's device no longer has", f.calls)
	}
}

// TestReconnectLeavesOthersTap: a reconnect without a record (the hook
// was installed, and libvirtd restarted, while the domain ran on a tap
// the operator made) must not claim that tap as netctl's, or the
// domain's release would delete it. Only a tap carrying the hook's
// marker (the alias CreateTap sets) is recorded.
func TestReconnectLeavesOthersTap(t *testing.T) {
	f := newFake(t)
	h, _, vd := newTestHook(t, f)
	ctx := context.Background()
	f.links["vm1tap0"] = 7 // made by hand: no marker
	res, err := h.Run(ctx, "netctl-all", "reconnect", "begin", bytes.NewReader(allXML(t, vd)))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("reconnect: %v", res.Done)
	if rec, err := h.Store.LoadDomain("netctl-all"); err != nil || len(rec.Taps) != 0 {
		t.Errorf("record after reconnect: %+v, %v; want no tap", rec, err)
	}
	if _, err := h.Run(ctx, "netctl-all", "release", "end", nil); err != nil {
		t.Fatal(err)
	}
	if f.links["vm1tap0"] != 7 {
		t.Errorf("release deleted the operator's tap vm1tap0 (links %v)", f.links)
	}
}
