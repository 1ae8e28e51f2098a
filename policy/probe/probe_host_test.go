package probe

import (
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
)

// TestHostProbe runs the probe on this machine's kernel (no vhost-net,
// no vDPA, tun with USO): it says what is missing and why, and leaves no
// link behind in the caller's namespace.
func TestHostProbe(t *testing.T) {
	testenv.Host(t)
	before, _ := net.Interfaces()
	r, err := Probe([]string{"lo", "nosuch0"})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Tap.Available || len(r.Tap.Offloads) == 0 || !r.Macvtap.Available || r.Tap.Error != "" || r.Macvtap.Error != "" {
		t.Errorf("tap %+v, macvtap %+v", r.Tap, r.Macvtap)
	}
	if !r.VhostNet.Available && (!strings.Contains(r.VhostNet.Error, "modprobe vhost_net") || r.VhostNet.BusyPoll != nil || r.VhostNet.BusyPollError == "") {
		t.Errorf("vhost-net unavailable without saying what to do, or busy-poll reported unmeasured: %+v", r.VhostNet)
	}
	if !r.VDPA.Available && r.VDPA.Error == "" {
		t.Error("vdpa unavailable without a reason")
	}
	if len(r.Devices) != 2 || r.Devices[0].Name != "lo" || !r.Devices[0].Features["loopback"] ||
		r.Devices[1].Name != "nosuch0" || !strings.Contains(r.Devices[1].Error, "nosuch0") {
		t.Errorf("devices %+v", r.Devices)
	}
	if r.QEMU.Version == "" && r.QEMU.Error == "" {
		t.Errorf("qemu %+v", r.QEMU)
	}
	if err := r.Validate(); err != nil {
		t.Error(err)
	}
	after, _ := net.Interfaces()
	if len(after) != len(before) {
		t.Errorf("%d links before the probe, %d after", len(before), len(after))
	}
}

// TestHostProbeNoTempDir: without a temporary directory the probe still
// never falls back to making nodes in the host's /dev: the scratch
// macvtap is opened through the node devtmpfs made for it (its own
// major:minor), and /dev/tap* is the same before and after.
func TestHostProbeNoTempDir(t *testing.T) {
	testenv.Host(t)
	t.Setenv("TMPDIR", "/nonexistent/netctl")
	before, _ := filepath.Glob("/dev/tap*")
	r, err := Probe(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Macvtap.Available || len(r.Macvtap.Offloads) == 0 {
		t.Errorf("macvtap %+v", r.Macvtap)
	}
	if !r.Tap.Available {
		t.Errorf("tap %+v", r.Tap)
	}
	// /dev is the machine's: devtmpfs also shows the macvtaps that other
	// tests (other packages run in parallel) have at this moment. A node
	// of theirs goes when their macvtap does; one netctl made would stay.
	after, _ := filepath.Glob("/dev/tap*")
	for deadline := time.Now().Add(5 * time.Second); !slices.Equal(before, after) && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		after, _ = filepath.Glob("/dev/tap*")
	}
	if !slices.Equal(before, after) {
		t.Errorf("/dev/tap* before %v, after %v (and 5 s later)", before, after)
	}
}

// TestHostProbeNonRoot runs netctl's probe as nobody in a subprocess: it
// reports what it can and, for tap and macvtap, why not.
func TestHostProbeNonRoot(t *testing.T) {
	if os.Getenv("NETCTL_PROBE_CHILD") == "1" {
		r, err := Probe([]string{"lo"})
		if err != nil {
			t.Fatal(err)
		}
		json.NewEncoder(os.Stdout).Encode(r)
		return
	}
	testenv.Host(t)
	// A copy of this test binary that nobody can run.
	dir, err := os.MkdirTemp("", "netctl-probe-nonroot-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "probe.test")
	src, err := os.Open("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.Copy(dst, src)
	src.Close()
	if cerr := dst.Close(); err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}
	for p := dir; p != "/"; p = filepath.Dir(p) { // every parent must be searchable by nobody
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm()&0o001 == 0 {
			t.Fatalf("%s is not searchable by nobody (%v): set TMPDIR to a world-searchable directory", p, err)
		}
	}
	cmd := exec.Command(bin, "-test.run=^TestHostProbeNonRoot$", "-test.count=1")
	cmd.Env = append(os.Environ(), "NETCTL_PROBE_CHILD=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the probe as nobody: %v\n%s", err, out)
	}
	var r Result
	if err := json.NewDecoder(strings.NewReader(string(out))).Decode(&r); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if err := r.Validate(); err != nil {
		t.Error(err)
	}
	for name, s := range map[string]string{"tap": r.Tap.Error, "macvtap": r.Macvtap.Error} {
		if !strings.Contains(s, "needs CAP_SYS_ADMIN (run as root)") {
			t.Errorf("%s as nobody: %q", name, s)
		}
	}
	if r.Tap.Available || r.Macvtap.Available || r.VDPA.Error == "" || r.ZeroCopy.Threshold != 256 || r.Kernel == "" || len(r.Devices) != 1 {
		t.Errorf("as nobody: %+v", r)
	}
	if r.QEMU.Version == "" && r.QEMU.Error == "" {
		t.Errorf("qemu as nobody %+v", r.QEMU)
	}
	// Reading a device's features needs no privilege (ethtool -k works as
	// any user), so --dev is read as nobody too.
	if len(r.Devices) == 1 && (r.Devices[0].Error != "" || !r.Devices[0].Features["loopback"]) {
		t.Errorf("--dev lo as nobody: %+v", r.Devices[0])
	}
}
