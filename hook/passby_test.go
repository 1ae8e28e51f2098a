package hook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/hostnic"
	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/state"
)

// everyOp is every operation libvirt runs the qemu hook with (libvirt's
// hooks documentation), and one it may add later.
var everyOp = [][2]string{
	{"prepare", "begin"}, {"start", "begin"}, {"started", "begin"}, {"stopped", "end"}, {"release", "end"},
	{"migrate", "begin"}, {"restore", "begin"}, {"reconnect", "begin"}, {"attach", "begin"},
	{"some-future-op", "begin"},
}

// brokenConfig is what the CLI hands the hook when the host config does
// not load (a typo in manage, here).
var brokenConfig = fmt.Errorf("hook config /etc/netctl/hook.json: manage \"some\": use \"listed\" or \"all\": %w", errs.ErrInvalid)

// checkPassedBy runs every operation on a domain netctl manages nothing
// in, with a good and with a broken host config: each must succeed, do
// nothing to the host and write no record.
func checkPassedBy(t *testing.T, domain string, domainXML []byte) {
	t.Helper()
	for _, broken := range []bool{false, true} {
		f := newFake(t)
		h, log, _ := newTestHook(t, f)
		if broken {
			h.Config, h.ConfigErr = nil, brokenConfig
		}
		for _, op := range everyOp {
			res, err := h.Run(context.Background(), domain, op[0], op[1], bytes.NewReader(domainXML))
			if err != nil {
				t.Errorf("domain %.40q, broken config %v: %s %s refused: %v", domain, broken, op[0], op[1], err)
				continue
			}
			if res != nil && len(res.Done) > 0 {
				t.Errorf("domain %.40q: %s %s did %q", domain, op[0], op[1], res.Done)
			}
		}
		if len(f.calls) != 0 {
			t.Errorf("domain %.40q, broken config %v: the hook touched the host: %v", domain, broken, f.calls)
		}
		if ds, bad, err := h.Store.ListDomains(); len(ds) != 0 || len(bad) != 0 || err != nil {
			t.Errorf("domain %.40q: records %v %v %v", domain, ds, bad, err)
		}
		if t.Failed() {
			t.Logf("log:\n%s", log)
			return
		}
	}
}

// libvirtSuiteDir is where test/libvirt-suite.sh puts libvirt's own
// test-suite domain XMLs (make test runs it first).
func libvirtSuiteDir(t *testing.T) string {
	if d := os.Getenv("NETCTL_LIBVIRT_SUITE"); d != "" {
		return d
	}
	return filepath.Join("..", ".cache", "libvirt-qemuxml")
}

// TestLibvirtSuiteDomains runs every domain of libvirt's own test suite
// (tests/qemuxml2argvdata and four more directories of libvirt 9.0.0:
// hostdev VFs with vfio, vhost-user, user, network, bridge, udp, mcast,
// ethernet and vdpa interfaces on libvirt's own devices, odd names and
// drivers) through every hook operation: none is netctl's, so every one
// passes, touches nothing and records nothing, whatever the host
// config's state. Under make test (NETCTL_VM_DEPS=1) the suite must be
// there.
func TestLibvirtSuiteDomains(t *testing.T) {
	dir := libvirtSuiteDir(t)
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err != nil {
		if os.Getenv("NETCTL_VM_DEPS") != "" {
			t.Fatalf("libvirt's test-suite domains are not in %s: make test runs test/libvirt-suite.sh first: %v", dir, err)
		}
		t.Skipf("libvirt's test-suite domains are not in %s (bash test/libvirt-suite.sh %s fetches them)", dir, dir)
	}
	n, withIfaces := 0, 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".xml") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if !bytes.Contains(b, []byte("<domain")) {
			return nil
		}
		n++
		if bytes.Contains(b, []byte("<interface")) {
			withIfaces++
		}
		name := "x"
		if i := bytes.Index(b, []byte("<name>")); i >= 0 {
			if j := bytes.Index(b[i:], []byte("</name>")); j > 0 {
				name = string(b[i+6 : i+j])
			}
		}
		t.Run(strings.TrimPrefix(p, dir+"/"), func(t *testing.T) { checkPassedBy(t, name, b) })
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 1000 || withIfaces < 150 {
		t.Fatalf("only %d domains (%d with interfaces) in %s", n, withIfaces, dir)
	}
	t.Logf("%d domains, %d with interfaces", n, withIfaces)
}

// TestPassesWhatItDoesNotManage: domains that hold nothing netctl
// manages pass every operation whatever they hold: an SR-IOV VF as
// libvirt documents it, names libvirt allows (long, flag-like, spaces),
// interfaces netctl would refuse if it managed them, XML it cannot parse
// and XML over MaxXML.
func TestPassesWhatItDoesNotManage(t *testing.T) {
	vf := `<domain type='kvm'><name>%s</name><memory>1024</memory>
  <devices>
    <interface type='hostdev' managed='yes'>
      <driver name='vfio'/>
      <source><address type='pci' domain='0x0000' bus='0x06' slot='0x02' function='0x0'/></source>
      <mac address='52:54:00:6d:90:02'/>
      <vlan><tag id='42'/></vlan>
    </interface>
    <interface type='ethernet'><mac address='nonsense'/><target dev='a/b:c' managed='no'/><driver name='vfio' queues='9999'/><mtu size='1'/></interface>
    <interface type='vdpa'><source dev='/dev/vhost-vdpa-0'/><driver name='vfio'/></interface>
    <interface type='direct'><source dev='eth0' mode='bridge'/></interface>
  </devices></domain>`
	long := strings.Repeat("n", 200)
	for _, name := range []string{"vf", long, "-x", "--help", "a b", "dom\twith tab", "ünïcödé"} {
		checkPassedBy(t, name, fmt.Appendf(nil, vf, name))
	}
	checkPassedBy(t, "broken", []byte("<domain><name>broken</name><devices><interface type="))
	checkPassedBy(t, "empty", nil)
	huge := fmt.Appendf(nil, vf, "huge")
	huge = bytes.Replace(huge, []byte("<devices>"), append([]byte("<devices>"), bytes.Repeat([]byte("<!-- padding -->"), MaxXML/16+1)...), 1)
	checkPassedBy(t, "huge", huge)
}

// TestBrokenConfigStillManagesListed: with a host config that does not
// load, a domain that asks for netctl (its metadata) is refused at
// prepare and at migrate begin (which checks the destination can carry
// it, as prepare decides) with the config's error, and release still
// frees what an earlier prepare made, and started, reconnect and restore
// never fail.
func TestBrokenConfigStillManagesListed(t *testing.T) {
	f := newFake(t)
	h, _, vd := newTestHook(t, f)
	ctx := context.Background()
	if _, err := h.Run(ctx, "netctl-all", "prepare", "begin", bytes.NewReader(allXML(t, vd))); err != nil {
		t.Fatal(err)
	}
	made := f.snapshot()
	h.Config, h.ConfigErr = nil, brokenConfig
	for _, op := range [][2]string{{"started", "begin"}, {"reconnect", "begin"}, {"restore", "begin"}, {"stopped", "end"}} {
		if _, err := h.Run(ctx, "netctl-all", op[0], op[1], bytes.NewReader(allXML(t, vd))); err != nil {
			t.Errorf("%s %s with a broken config: %v", op[0], op[1], err)
		}
	}
	if _, err := h.Run(ctx, "netctl-all", "migrate", "begin", bytes.NewReader(allXML(t, vd))); !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), `manage "some"`) {
		t.Errorf("migrate begin of a listed domain with a broken config: %v", err)
	}
	if f.snapshot() != made {
		t.Errorf("devices changed: %s -> %s", made, f.snapshot())
	}
	if _, err := h.Run(ctx, "netctl-all", "release", "end", bytes.NewReader(allXML(t, vd))); err != nil {
		t.Fatalf("release with a broken config: %v", err)
	}
	if got := f.snapshot(); got != "eth0#2" {
		t.Errorf("release left %s", got)
	}
	_, err := h.Run(ctx, "netctl-all", "prepare", "begin", bytes.NewReader(allXML(t, vd)))
	if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), `manage "some"`) {
		t.Errorf("prepare of a listed domain with a broken config: %v", err)
	}
	if got := f.snapshot(); got != "eth0#2" {
		t.Errorf("refused prepare left %s", got)
	}
}

// TestStartedIsBestEffort: libvirt stops a domain whose started hook
// fails, so started never fails: not for a record it cannot lock (another
// hook call holds the domain's lock), nor for XML it cannot read, nor
// for a record it cannot write.
func TestStartedIsBestEffort(t *testing.T) {
	f := newFake(t)
	h, _, vd := newTestHook(t, f)
	ctx := context.Background()
	if _, err := h.Run(ctx, "netctl-all", "prepare", "begin", bytes.NewReader(allXML(t, vd))); err != nil {
		t.Fatal(err)
	}
	l, err := h.Store.Lock(ctx, state.DomainLockKey("netctl-all"))
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := h.Run(sctx, "netctl-all", "started", "begin", bytes.NewReader(allXML(t, vd)))
	if err != nil {
		t.Errorf("started with the domain's lock held: %v", err)
	} else if len(res.Notes) == 0 {
		t.Errorf("started with the lock held says nothing: %+v", res)
	}
	if sctx.Err() != nil {
		t.Errorf("started waited out the hook's whole timeout for the lock")
	}
	l.Unlock()
	for name, x := range map[string][]byte{"broken XML": []byte("<domain"), "other domain's XML": []byte("<domain><name>other</name></domain>")} {
		if _, err := h.Run(ctx, "netctl-all", "started", "begin", bytes.NewReader(x)); err != nil {
			t.Errorf("started with %s: %v", name, err)
		}
	}
	rec, err := h.Store.LoadDomain("netctl-all")
	if err != nil || rec.Status != state.DomainStarted {
		t.Errorf("record after started: %+v %v", rec, err)
	}
}

// crashingDevices stops the calling goroutine (runtime.Goexit: deferred
// calls run, as after a crash nothing else does; err is still nil, so
// Prepare's undo does not run) right after CreateTap made the tap, the
// window a SIGKILL or an OOM kill can hit.
type crashingDevices struct{ *fakeDevices }

func (c crashingDevices) CreateTap(it hostnic.PersistentTap) (int, error) {
	ix, err := c.fakeDevices.CreateTap(it)
	if err == nil {
		runtime.Goexit()
	}
	return ix, err
}

// TestPrepareAfterCrashAfterTap: a hook killed between creating a tap
// and saving the record must not leave a tap that stops the domain from
// ever starting again: the next prepare finds the intent record, deletes
// the tap it made and makes it again; a release instead removes it.
func TestPrepareAfterCrashAfterTap(t *testing.T) {
	for _, next := range []string{"prepare", "release"} {
		t.Run(next, func(t *testing.T) {
			f := newFake(t)
			h, log, vd := newTestHook(t, f)
			ctx := context.Background()
			crashed := *h
			crashed.Devices = crashingDevices{f}
			runToCrash(&crashed, ctx, "netctl-all", "prepare", "begin", bytes.NewReader(allXML(t, vd)))
			if !strings.Contains(f.snapshot(), "vm1tap0") {
				t.Fatalf("the crash came before the tap: %s", f.snapshot())
			}
			afterCrash(t, h, f, log, vd, next)
		})
	}
}

// TestCrashedIntentLeavesOthersTap: an intent record's tap that another
// domain's record holds now (the crashed domain's tap was deleted by
// hand and another domain made one with the name) is not deleted.
func TestCrashedIntentLeavesOthersTap(t *testing.T) {
	f := newFake(t)
	h, log, vd := newTestHook(t, f)
	ctx := context.Background()
	crashed := *h
	crashed.Devices = crashingDevices{f}
	runToCrash(&crashed, ctx, "netctl-all", "prepare", "begin", bytes.NewReader(allXML(t, vd)))
	delete(f.links, "vm1tap0") // ip link del vm1tap0, by hand
	other := bytes.ReplaceAll(allXML(t, vd), []byte("<name>netctl-all</name>"), []byte("<name>other</name>"))
	other = bytes.ReplaceAll(other, []byte("vm1vdpa0"), []byte("vm2vdpa0"))
	if _, err := h.Run(ctx, "other", "prepare", "begin", bytes.NewReader(other)); err != nil {
		t.Fatalf("other domain: %v", err)
	}
	theirs := f.links["vm1tap0"]
	if _, err := h.Run(ctx, "netctl-all", "release", "end", nil); err != nil {
		t.Fatalf("release: %v", err)
	}
	if f.links["vm1tap0"] != theirs || theirs == 0 {
		t.Errorf("the crashed domain's release deleted the other domain's tap (%d -> %d)\nlog:\n%s", theirs, f.links["vm1tap0"], log)
	}
}

// FuzzRunPassesOthers: any domain XML that does not name netctl passes
// every operation without touching the host, and any other XML gives a
// result or an error, never a panic.
func FuzzRunPassesOthers(f *testing.F) {
	for _, n := range []string{"net-vdpa.xml", "kubevirt-ethernet.xml", "netctl-all.xml", "libvirt-disable-offloads.xml"} {
		f.Add(sample(f, n), "prepare")
	}
	f.Add(sample(f, "migrate-vhost.xml"), "migrate")
	f.Add([]byte("<domain><name>-x</name><devices><interface type='hostdev'><driver name='vfio'/></interface></devices></domain>"), "reconnect")
	f.Fuzz(func(t *testing.T, b []byte, op string) {
		if len(b) > 1<<16 {
			return
		}
		fd := newFake(t)
		h, _, _ := newTestHook(t, fd)
		mine := hasAny(b, Marks(h.Config))
		for _, o := range []string{op, "prepare", "reconnect", "started", "migrate"} {
			sub := "begin"
			_, err := h.Run(context.Background(), "fuzz", o, sub, bytes.NewReader(b))
			if !mine && (err != nil || len(fd.calls) != 0) {
				t.Fatalf("%s of XML that does not name netctl: %v, calls %v", o, err, fd.calls)
			}
		}
	})
}

// runToCrash runs a prepare (or any call) of h on a goroutine of its own
// and waits for it: a Devices or hook that calls runtime.Goexit there
// stands for a kill at that step (deferred calls run; err is still nil,
// so Prepare's undo does not).
func runToCrash(h *Hook, ctx context.Context, domain, op, subop string, r io.Reader) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.Run(ctx, domain, op, subop, r)
	}()
	<-done
}

// afterCrash is what follows a crashed prepare of netctl-all: next is
// "prepare" (a new start, then its release) or "release"; either way
// nothing of the domain's is left on the host.
func afterCrash(t *testing.T, h *Hook, f *fakeDevices, log *bytes.Buffer, vd, next string) {
	t.Helper()
	ctx := context.Background()
	switch next {
	case "prepare":
		if _, err := h.Run(ctx, "netctl-all", "prepare", "begin", bytes.NewReader(allXML(t, vd))); err != nil {
			t.Fatalf("prepare after a crash: %v\nlog:\n%s", err, log)
		}
		if _, err := h.Run(ctx, "netctl-all", "release", "end", nil); err != nil {
			t.Fatal(err)
		}
	case "release":
		if _, err := h.Run(ctx, "netctl-all", "release", "end", nil); err != nil {
			t.Fatalf("release after a crash: %v", err)
		}
	}
	if got := f.snapshot(); got != "eth0#2" {
		t.Errorf("left %s\nlog:\n%s", got, log)
	}
}
