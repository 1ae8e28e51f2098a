package libvirtd_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netctl/netctl/state"
)

// TestHostReviewPinTransient: netctl hook pin on a transient domain (virsh
// create) must not make it persistent: virDomainDefineXML of a running
// transient domain's UUID turns it into a persistent one, something the
// operator did not ask for (and its XML is the live one). Pin refuses
// ("domain X is transient: it has no persistent definition to pin; ...")
// and leave the domain as it is.
func TestHostReviewPinTransient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	e := newLvEnv(t, ctx)
	g, err := e.d.NewGuest(ctx, "trans", guestScript)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := e.d.Create(g, g.DomainXML(netctlMetadata, netctlIface(""))); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	info := mustVirsh(t, e.d, "dominfo", "trans")
	if !strings.Contains(info, "Persistent:     no") {
		t.Fatalf("the domain is not transient before the pin:\n%s", info)
	}
	out, err := e.netctl("hook", "pin", "trans")
	t.Logf("netctl hook pin trans: %v\n%s", err, out)
	if info := mustVirsh(t, e.d, "dominfo", "trans"); !strings.Contains(info, "Persistent:     no") {
		t.Errorf("netctl hook pin made the transient domain persistent:\n%s", info)
	}
	e.d.Virsh("destroy", "trans")
	e.d.Virsh("undefine", "trans")
}

// TestHostReviewAttachTimeoutMidHotplug: netctl attach whose --timeout
// ends while libvirt is hotplugging (libvirtd held with SIGSTOP once
// netctl's tap exists, let go after netctl gave up) must not leave the
// domain with an interface netctl no longer knows. Before the fix the undo
// deleted the tap and the record while libvirt completed the hotplug, so
// the domain kept <interface> ua-netctl-ID on a deleted tap, no record
// named it, and netctl detach said it had no such NIC; now, without
// libvirt's answer, the tap and the record stay and netctl detach removes
// them (and the NIC). Each try holds libvirtd a little later.
func TestHostReviewAttachTimeoutMidHotplug(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	e := newLvEnv(t, ctx)
	e.boot(t, "lvint", false)
	b, err := os.ReadFile("/run/libvirtd.pid")
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	for try := 0; try < 10; try++ {
		id := fmt.Sprintf("t%d", try)
		s := e.start(t, "attach", "--libvirt", "qemu:///system", "--vm", "lvint", "--id", id, "--timeout", "4s")
		stopped := false
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
			if len(lvTaps()) > 0 {
				time.Sleep(time.Duration(try) * 4 * time.Millisecond)
				syscall.Kill(pid, syscall.SIGSTOP)
				stopped = true
				break
			}
			time.Sleep(50 * time.Microsecond)
		}
		err := s.wait()
		if stopped {
			syscall.Kill(pid, syscall.SIGCONT)
		}
		time.Sleep(3 * time.Second) // libvirtd finishes what it was doing
		if err == nil {
			t.Logf("try %d: the attach got through before libvirtd stopped; detach", try)
			if out, err := e.netctl("detach", "--libvirt", "qemu:///system", "--vm", "lvint", "--id", id); err != nil {
				t.Fatalf("detach: %v\n%s", err, out)
			}
			continue
		}
		t.Logf("try %d: attach failed: %v", try, err)
		// Either nothing is left, or (libvirt's outcome unknown) the
		// record stays with the tap and netctl detach removes all of it:
		// an interface in the domain that no record names is the defect.
		dl := mustVirsh(t, e.d, "domiflist", "lvint")
		if strings.Contains(dl, "nctl") && len(lvRecords()) == 0 {
			out, derr := e.netctl("detach", "--libvirt", "qemu:///system", "--vm", "lvint", "--id", id)
			t.Fatalf("the failed attach left an interface in the domain (records %v, taps %v):\n%s\nnetctl detach: %v\n%s",
				lvRecords(), lvTaps(), dl, derr, out)
		}
		if len(lvRecords()) > 0 {
			if out, err := e.netctl("detach", "--libvirt", "qemu:///system", "--vm", "lvint", "--id", id); err != nil {
				t.Fatalf("try %d: detach of the kept record: %v\n%s", try, err, out)
			}
		}
		e.nothingLeft(t, fmt.Sprintf("try %d", try), "lvint")
	}
}

// TestHostReviewPinKeepsSecrets: hook pin must change nothing in the
// persistent definition but the interfaces' <driver>. It reads the
// definition without VIR_DOMAIN_XML_SECURE, so what libvirt hides from
// such a read (a <graphics passwd>) is missing from what it defines: the
// pin silently removes the domain's VNC password.
func TestHostReviewPinKeepsSecrets(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	e := newLvEnv(t, ctx)
	g, err := e.d.NewGuest(ctx, "secret", guestScript)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(g.Dir, "domain.xml")
	x := g.DomainXML(netctlMetadata, netctlIface(""), `    <graphics type='vnc' port='-1' autoport='yes' passwd='s3cret'/>`)
	if err := os.WriteFile(f, []byte(x), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := e.d.Virsh("define", f); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if before := mustVirsh(t, e.d, "dumpxml", "--inactive", "--security-info", "secret"); !strings.Contains(before, "passwd='s3cret'") {
		t.Fatalf("no passwd before the pin:\n%s", before)
	}
	out, err := e.netctl("hook", "pin", "secret")
	if err != nil {
		t.Fatalf("netctl hook pin: %v\n%s", err, out)
	}
	if after := mustVirsh(t, e.d, "dumpxml", "--inactive", "--security-info", "secret"); !strings.Contains(after, "passwd='s3cret'") {
		t.Errorf("netctl hook pin removed the domain's VNC password; its definition now:\n%s", after)
	}
	e.d.Virsh("undefine", "secret")
}

// TestHostReviewParallelSameMAC: two netctl attaches to one domain with
// the same --mac and distinct --id, run at once: checkFree looks at the
// live XML before the per-NIC lock, and the two locks differ, so both may
// pass it. At most one may end with the MAC in the domain (two NICs with
// one MAC break the guest's L2, and the issue asks netctl to refuse a MAC
// in use).
func TestHostReviewParallelSameMAC(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e := newLvEnv(t, ctx)
	e.boot(t, "lvmac", false)
	const mac = "52:54:00:7c:00:01"
	for try := 0; try < 5; try++ {
		a := e.start(t, "attach", "--libvirt", "qemu:///system", "--vm", "lvmac", "--id", "a", "--mac", mac)
		b := e.start(t, "attach", "--libvirt", "qemu:///system", "--vm", "lvmac", "--id", "b", "--mac", mac)
		ea, eb := a.wait(), b.wait()
		dl := mustVirsh(t, e.d, "domiflist", "lvmac")
		if n := strings.Count(dl, mac); n > 1 {
			t.Fatalf("try %d: the domain has %d interfaces with MAC %s (attach a: %v; attach b: %v):\n%s", try, n, mac, ea, eb, dl)
		}
		for _, id := range []string{"a", "b"} {
			e.netctl("detach", "--libvirt", "qemu:///system", "--vm", "lvmac", "--id", id)
		}
		e.nothingLeft(t, fmt.Sprintf("try %d", try), "lvmac")
	}
}

// TestHostReviewNoLockLeft: an attach and its detach leave no lock file
// of the domain's NIC (or MAC) in the run dir: each NIC id, and each
// random MAC, would otherwise leave one file per attach until netctl gc.
func TestHostReviewNoLockLeft(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	e := newLvEnv(t, ctx)
	e.boot(t, "lvlock", false)
	for _, id := range []string{"k1", "k2"} {
		e.attach(t, "--libvirt", "qemu:///system", "--vm", "lvlock", "--id", id)
		if out, err := e.netctl("detach", "--libvirt", "qemu:///system", "--vm", "lvlock", "--id", id); err != nil {
			t.Fatalf("detach: %v\n%s", err, out)
		}
	}
	e.nothingLeft(t, "after the detaches", "lvlock")
	if m, _ := filepath.Glob(filepath.Join(state.DefaultDir, "locks", "lv=*")); len(m) != 0 {
		t.Errorf("lock files left after attach and detach: %v", m)
	}
}
