package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/test/vduse"
	"github.com/netctl/netctl/vdpa"
)

func runNetctl(args ...string) (string, error) {
	app := newApp()
	var out bytes.Buffer
	app.Writer, app.ErrWriter = &out, &out
	err := app.Run(append([]string{"netctl"}, args...))
	return out.String(), err
}

// iproute2 runs the host's iproute2 vdpa in the guest through a chroot on
// /host, with the guest's /dev, /proc and /sys bound into it.
func iproute2(t *testing.T, args ...string) []byte {
	t.Helper()
	for _, m := range []string{"dev", "proc", "sys"} {
		var st unix.Statfs_t
		if unix.Statfs("/host/"+m+"/.", &st) == nil && m == "proc" && st.Type == unix.PROC_SUPER_MAGIC {
			continue
		}
		if err := unix.Mount("/"+m, "/host/"+m, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			t.Fatalf("bind /%s into /host: %v", m, err)
		}
	}
	out, err := exec.Command("chroot", append([]string{"/host", "/usr/sbin/vdpa"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("iproute2 vdpa %v: %v: %s", args, err, out)
	}
	return out
}

// trimKeys removes the trailing spaces iproute2 6.1 leaves in some keys
// ("link ", "link_announce ").
func trimKeys(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := map[string]any{}
		for k, e := range x {
			m[strings.TrimSpace(k)] = trimKeys(e)
		}
		return m
	case []any:
		for i := range x {
			x[i] = trimKeys(x[i])
		}
	case string:
		return strings.TrimSpace(x)
	}
	return v
}

// sameFields checks that every field iproute2 printed is in ours with the
// same value (ours may say more, like dev_features).
func sameFields(t *testing.T, what string, ours, theirs []byte) {
	t.Helper()
	var o, th any
	if err := json.Unmarshal(ours, &o); err != nil {
		t.Fatalf("%s: our JSON %q: %v", what, ours, err)
	}
	if err := json.Unmarshal(theirs, &th); err != nil {
		t.Fatalf("%s: iproute2 JSON %q: %v", what, theirs, err)
	}
	th = trimKeys(th)
	var walk func(path string, a, b any)
	walk = func(path string, a, b any) {
		bm, ok := b.(map[string]any)
		if !ok {
			if !reflect.DeepEqual(a, b) {
				t.Errorf("%s %s: netctl %v, iproute2 %v", what, path, a, b)
			}
			return
		}
		am, ok := a.(map[string]any)
		if !ok {
			t.Errorf("%s %s: netctl has %v, iproute2 an object %v", what, path, a, b)
			return
		}
		for k, bv := range bm {
			av, ok := am[k]
			if !ok {
				t.Errorf("%s %s: netctl lacks %q (iproute2: %v)", what, path, k, bv)
				continue
			}
			walk(path+"."+k, av, bv)
		}
	}
	walk("", o, th)
}

func TestVMVDPACommandsMatchIproute2(t *testing.T) {
	k := testenv.VM(t)
	if !k.Has("vdpa") {
		_, err := runNetctl("vdpa", "dev", "show")
		if err == nil || !strings.Contains(err.Error(), "this kernel has no vdpa support") {
			t.Fatalf("kernel %s: netctl vdpa dev show: %v, want an error saying the kernel has no vdpa", k.Name, err)
		}
		return
	}
	dev, err := vduse.Create(vduse.Config{Name: "clitest0"})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if out, err := runNetctl("vdpa", "dev", "add", "--name", "clitest0", "--mgmtdev", "vduse", "--mtu", "9000"); err == nil ||
		!strings.Contains(err.Error(), "takes no mac, mtu") {
		t.Errorf("dev add --mtu on vduse: %v %s", err, out)
	}
	if out, err := runNetctl("vdpa", "dev", "add", "--name", "clitest0", "--mgmtdev", "vduse"); err != nil {
		t.Fatalf("dev add: %v: %s", err, out)
	}
	for _, args := range [][]string{{"mgmtdev", "show"}, {"dev", "show"}, {"dev", "show", "clitest0"}, {"dev", "config", "show", "clitest0"}} {
		ours, err := runNetctl(append([]string{"vdpa", "-j"}, args...)...)
		if err != nil {
			t.Fatalf("netctl vdpa %v -j: %v", args, err)
		}
		theirs := iproute2(t, append([]string{"-j"}, args...)...)
		sameFields(t, strings.Join(args, " "), []byte(ours), theirs)
	}
	text, err := runNetctl("vdpa", "dev", "show")
	if err != nil || !strings.Contains(text, "clitest0") || !strings.Contains(text, "vhost_vdpa") {
		t.Errorf("dev show table: %v\n%s", err, text)
	}
	if out, err := runNetctl("vdpa", "dev", "del", "clitest0"); err != nil {
		t.Fatalf("dev del: %v: %s", err, out)
	}
	if out, _ := runNetctl("vdpa", "-j", "dev", "show"); strings.Contains(out, "clitest0") {
		t.Errorf("after del: %s", out)
	}
}

// TestVMVDPADelTimeout: netctl vdpa --timeout bounds dev del while the
// kernel holds the delete (the device's vhost-vdpa fd is in flight in an
// SCM_RIGHTS message, where no process table shows it).
func TestVMVDPADelTimeout(t *testing.T) {
	k := testenv.VM(t)
	if !k.Has("vdpa") {
		_, err := runNetctl("vdpa", "--timeout", "1s", "dev", "del", "clitest1")
		if !errors.Is(err, vdpa.ErrNotAvailable) || !strings.Contains(err.Error(), "this kernel has no vdpa support") {
			t.Fatalf("kernel %s: netctl vdpa dev del: %v, want an error saying the kernel has no vdpa", k.Name, err)
		}
		return
	}
	dev, err := vduse.Create(vduse.Config{Name: "clitest1"})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if out, err := runNetctl("vdpa", "dev", "add", "--name", "clitest1", "--mgmtdev", "vduse"); err != nil {
		t.Fatalf("dev add: %v: %s", err, out)
	}
	path, err := vdpa.VhostVDPAPath("clitest1")
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Sendmsg(sp[0], []byte{0}, unix.UnixRights(fd), nil, 0); err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	released := false
	release := func() {
		if !released {
			released = true
			unix.Close(sp[0])
			unix.Close(sp[1])
		}
	}
	defer release()
	t0 := time.Now()
	_, err = runNetctl("vdpa", "--timeout", "1s", "dev", "del", "clitest1")
	if el := time.Since(t0); !errors.Is(err, vdpa.ErrBusy) || !errors.Is(err, context.DeadlineExceeded) || el > 4*time.Second {
		t.Errorf("dev del --timeout 1s with the fd in flight: after %s: %v", el, err)
	}
	release()
	for deadline := time.Now().Add(10 * time.Second); ; {
		out, err := runNetctl("vdpa", "--timeout", "1s", "dev", "show", "clitest1")
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("clitest1 still there after its last fd closed: %v %s", err, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
