package vm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/netctl/netctl/internal/testenv"
)

func TestResolveOrdersDependenciesFirst(t *testing.T) {
	deps := map[string][]string{
		"vhost_net":    {"vhost", "tun", "tap"},
		"vhost":        {"vhost_iotlb"},
		"vhost_vdpa":   {"vdpa", "vhost", "vhost_iotlb", "irqbypass"},
		"virtio_vdpa":  {"vdpa"},
		"macvtap":      {"macvlan", "tap"},
		"9pnet_virtio": {"9pnet", "virtio_ring"},
	}
	has := map[string]bool{"vhost_net": true, "vhost": true, "vhost_iotlb": true, "tun": true, "tap": true,
		"vhost_vdpa": true, "vdpa": true, "irqbypass": true, "virtio_vdpa": true, "macvtap": true, "macvlan": true,
		"9pnet_virtio": true, "9pnet": true}
	order, builtin, missing, err := resolve(
		[]string{"virtio_console", "9pnet_virtio", "macvtap", "vhost_net", "vduse", "vhost_vdpa", "virtio_vdpa"},
		func(m string) bool { return m == "virtio_console" || m == "virtio_ring" },
		func(m string) bool { return has[m] },
		func(m string) ([]string, error) { return deps[m], nil })
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"9pnet", "9pnet_virtio", "macvlan", "tap", "macvtap", "vhost_iotlb", "vhost", "tun", "vhost_net",
		"vdpa", "irqbypass", "vhost_vdpa", "virtio_vdpa"}
	if !reflect.DeepEqual(order, want) {
		t.Errorf("order\n got %v\nwant %v", order, want)
	}
	if !reflect.DeepEqual(builtin, []string{"virtio_console"}) || !reflect.DeepEqual(missing, []string{"vduse"}) {
		t.Errorf("builtin %v missing %v", builtin, missing)
	}
	// A dependency that is neither built in nor present is an error that
	// names who needed it.
	_, _, _, err = resolve([]string{"a"}, func(string) bool { return false },
		func(m string) bool { return m == "a" }, func(string) ([]string, error) { return []string{"b"}, nil })
	if err == nil || !strings.Contains(err.Error(), "b not found (needed by a)") {
		t.Errorf("missing dependency: %v", err)
	}
}

// TestCpioRoundTrip checks the initramfs writer against GNU cpio's reader
// when it is installed, and against the format's fixed layout always.
func TestCpioRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	c := &cpioWriter{w: &buf}
	c.Dir("bin")
	c.File("bin/hello", 0o755, []byte("hello, world\n"))
	c.CharDev("console", 5, 1)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	if len(b)%4 != 0 || !bytes.HasPrefix(b, []byte("070701")) || !bytes.Contains(b, []byte("TRAILER!!!\x00")) {
		t.Fatalf("not a newc archive: % x", b[:16])
	}
	// A subtest, so that a machine without GNU cpio reports it as SKIP
	// instead of passing the whole test on the layout check alone.
	t.Run("gnu_cpio_reads_it", func(t *testing.T) {
		if _, err := exec.LookPath("cpio"); err != nil {
			if os.Getenv("NETCTL_VM_DEPS") == "1" { // make test ran make vm-deps first
				t.Fatal("GNU cpio is not installed although make vm-deps ran")
			}
			t.Skip("GNU cpio is not installed (make vm-deps installs it)")
		}
		dir := t.TempDir()
		cmd := exec.Command("cpio", "-t", "-v")
		cmd.Stdin = bytes.NewReader(b)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("cpio -t: %v\n%s", err, out)
		}
		for _, want := range []string{"bin", "bin/hello", "console"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("cpio -t lacks %s:\n%s", want, out)
			}
		}
		cmd = exec.Command("cpio", "-i", "-d", "--quiet", "bin/hello")
		cmd.Dir, cmd.Stdin = dir, bytes.NewReader(b)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("cpio -i: %v\n%s", err, out)
		}
		if got, _ := os.ReadFile(filepath.Join(dir, "bin/hello")); string(got) != "hello, world\n" {
			t.Errorf("extracted %q", got)
		}
	})
}

func TestDecodeStatus(t *testing.T) {
	const panicConsole = "[ 1.0] sysrq: Trigger a crash\n[ 1.1] Kernel panic - not syncing: sysrq triggered crash\n"
	for _, c := range []struct {
		name     string
		status   int
		rc       string
		haveRC   bool
		console  string
		wantCode int
		wantErr  any
	}{
		{"guest exit 0", 1, "0\n", true, "", 0, nil},
		{"guest exit 7", 15, "7\n", true, "", 7, nil},
		{"guest exit 200 clamped on the port", 255, "200\n", true, "", 200, nil},
		{"panic", 0, "", false, panicConsole, -1, &PanicError{}},
		{"panic wins over a status", 1, "0", true, panicConsole, -1, &PanicError{}},
		{"qemu refused its arguments", 1, "", false, "", -1, &QEMUError{}},
		{"powered off without status", 0, "", false, "reboot: Power down\n", -1, &NoStatusError{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, err := decodeStatus(c.status, c.rc, c.haveRC, c.console, "qemu: bad option")
			if code != c.wantCode {
				t.Errorf("code %d, want %d", code, c.wantCode)
			}
			if c.wantErr == nil {
				if err != nil {
					t.Errorf("error %v", err)
				}
				return
			}
			target := reflect.New(reflect.TypeOf(c.wantErr)).Interface()
			if !errors.As(err, target) {
				t.Errorf("error %v (%T), want %T", err, err, c.wantErr)
			}
		})
	}
}

func TestScriptExportsKernelAndCaps(t *testing.T) {
	k, _ := LookupKernel("6.1")
	img := &Image{Kernel: k, Name: k.Name, Missing: []string{"vduse"}}
	s := img.script(RunOptions{Script: "echo hi", Env: map[string]string{"X": "it's"},
		Shares: []Share{{HostPath: "/tmp/b", GuestPath: "/host/tmp/b"}}})
	for _, want := range []string{
		"export NETCTL_VM_KERNEL='6.1'\n",
		"export NETCTL_VM_CAPS='" + k.CapsString() + "'\n",
		"export X='it'\\''s'\n",
		"mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 share0 '/host/tmp/b'",
		"echo hi\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("script lacks %q:\n%s", want, s)
		}
	}
}

func TestGuestEnvSaysHowTheGuestRuns(t *testing.T) {
	env := guestEnv("tcg", RunOptions{CPU: "max,erms=off", SMP: 2, Env: map[string]string{"X": "1", "NETCTL_VM_ACCEL": "kvm"}})
	want := map[string]string{"X": "1", "NETCTL_VM_ACCEL": "tcg", "NETCTL_VM_CPU": "max,erms=off", "NETCTL_VM_SMP": "2"}
	if !reflect.DeepEqual(env, want) {
		t.Errorf("guest env %v, want %v", env, want)
	}
}

// selfTestImage boots nothing unless NETCTL_VM_SELFTEST=1 (make test-harness
// sets it); then a missing image or QEMU is a failure.
func selfTestImage(t *testing.T, kernel string) *Image {
	t.Helper()
	if os.Getenv("NETCTL_VM_SELFTEST") != "1" {
		t.Skip("boots a VM: run with NETCTL_VM_SELFTEST=1 (make test-harness)")
	}
	cache, err := DefaultCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	k, err := LookupKernel(kernel)
	if err != nil {
		t.Fatal(err)
	}
	img, err := Prepare(t.Context(), cache, k, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func TestHarnessExitCodeAndOutput(t *testing.T) {
	t.Parallel()
	img := selfTestImage(t, "6.12")
	var out bytes.Buffer
	res, err := img.Run(t.Context(), RunOptions{
		Script: `echo "kernel=$NETCTL_VM_KERNEL caps=$NETCTL_VM_CAPS x=$X"; test -c /dev/vhost-net || exit 99; exit 42`,
		Env:    map[string]string{"X": "a b 'c'"},
		Stdout: &out,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 42 {
		t.Errorf("exit code %d, want 42; output:\n%s", res.ExitCode, out.String())
	}
	want := fmt.Sprintf("kernel=6.12 caps=%s x=a b 'c'\n", img.Kernel.CapsString())
	if out.String() != want {
		t.Errorf("output %q, want %q", out.String(), want)
	}
}

func TestHarnessReportsGuestPanic(t *testing.T) {
	t.Parallel()
	img := selfTestImage(t, "6.12")
	_, err := img.Run(t.Context(), RunOptions{Script: "echo c > /proc/sysrq-trigger; sleep 30", Stdout: io.Discard})
	var pe *PanicError
	if !errors.As(err, &pe) {
		t.Fatalf("got %v, want a *PanicError", err)
	}
	if !strings.Contains(pe.Message, "sysrq triggered crash") || !strings.Contains(err.Error(), "guest kernel panic") {
		t.Errorf("panic message %q / error %q", pe.Message, err)
	}
}

func TestHarnessReportsHang(t *testing.T) {
	t.Parallel()
	img := selfTestImage(t, "6.1")
	res, err := img.Run(t.Context(), RunOptions{Script: "echo before the hang; sleep 600", Timeout: 25e9, Stdout: io.Discard})
	var te *TimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("got %v, want a *TimeoutError", err)
	}
	if res.Wall > 40e9 {
		t.Errorf("a 25s timeout took %s", res.Wall)
	}
	if !strings.Contains(err.Error(), "timeout: the guest command did not finish within 25s") {
		t.Errorf("message %q", err)
	}
}

func TestHarnessReportsQEMUFailure(t *testing.T) {
	t.Parallel()
	img := selfTestImage(t, "6.12")
	_, err := img.Run(t.Context(), RunOptions{Script: "exit 0", QEMUArgs: []string{"-device", "no-such-device"}})
	var qe *QEMUError
	if !errors.As(err, &qe) {
		t.Fatalf("got %v, want a *QEMUError", err)
	}
	if !strings.Contains(qe.Stderr, "no-such-device") {
		t.Errorf("stderr %q does not name the bad device", qe.Stderr)
	}
}

// testenv.Require refuses capability names it does not know, so its list
// must be the harness's.
func TestCapsMatchTestenv(t *testing.T) {
	if got, want := slices.Sorted(slices.Values(testenv.Caps)), slices.Sorted(slices.Values(AllCaps)); !slices.Equal(got, want) {
		t.Errorf("internal/testenv.Caps %v, test/vm AllCaps %v", got, want)
	}
	for _, k := range Kernels {
		for _, c := range k.Caps {
			if !slices.Contains(AllCaps, c) {
				t.Errorf("kernel %s has capability %q, which AllCaps lacks", k.Name, c)
			}
		}
	}
}
