package libvirtd_test

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/test/libvirtd"
)

// TestHostLibvirtdReconnectBadConfig: libvirt kills a running domain
// whose "reconnect begin" hook fails. A domain netctl prepared keeps
// running across a libvirtd restart during which netctl's host config is
// one the hook refuses (a typo here): the hook's reconnect exits 0 and
// says why it did not rebuild the record; with the config fixed, destroy
// still releases the tap (the record from prepare was kept).
func TestHostLibvirtdReconnectBadConfig(t *testing.T) {
	bin := buildNetctl(t, t.TempDir())
	testenv.Host(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	d := libvirtd.New(t)
	for _, p := range []string{"/etc/netctl", "/var/log/netctl"} {
		if err := d.Private(p); err != nil {
			t.Fatal(err)
		}
	}
	const good = `{"timeout": "20s"}`
	if err := os.WriteFile("/etc/netctl/hook.json", []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "hook", "install", "--dir", d.HookDir).CombinedOutput(); err != nil {
		t.Fatalf("netctl hook install: %v\n%s", err, out)
	}
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	g, err := d.NewGuest(ctx, "nctl", guestScript)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := d.Create(g, g.DomainXML(netctlMetadata, netctlIface(`<driver name='qemu'/>`))); err != nil {
		t.Fatalf("%v\n%s\nnetctl's log:\n%s", err, out, readFile("/var/log/netctl/hook.log"))
	}
	if _, err := os.Stat("/sys/class/net/nctllv0"); err != nil {
		t.Fatalf("the tap netctl prepares: %v", err)
	}

	if err := os.WriteFile("/etc/netctl/hook.json", []byte(`{"manage": "some"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := d.RestartLibvirtd(ctx); err != nil {
		t.Fatal(err)
	}
	// libvirtd runs the reconnect hook while it reconnects, before or
	// just after virsh answers; wait for its line in libvirtd's log.
	for !strings.Contains(readFile(d.Log), "reconnect begin") {
		select {
		case <-ctx.Done():
			t.Fatalf("no reconnect hook call in %s", d.Log)
		case <-time.After(200 * time.Millisecond):
		}
	}
	names, err := d.Running()
	if err != nil || !slices.Contains(names, "nctl") {
		t.Fatalf("running domains after the restart with a bad netctl config: %v %v (libvirt killed nctl: the reconnect hook failed)\nlibvirtd's log (hook lines):\n%s", names, err, hookLines(readFile(d.Log)))
	}
	t.Logf("libvirtd's hook lines:\n%s", hookLines(readFile(d.Log)))

	if err := os.WriteFile("/etc/netctl/hook.json", []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := d.Virsh("destroy", "nctl"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if _, err := os.Stat("/sys/class/net/nctllv0"); !os.IsNotExist(err) {
		t.Errorf("nctllv0 after destroy: %v (want gone: netctl's release deletes it)", err)
	}
}

func hookLines(log string) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "netctl") && strings.Contains(l, "reconnect") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
