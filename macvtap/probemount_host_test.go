package macvtap_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/testenv"
)

// TestHostProbeMountErrors: ProbeOffloads reports a mount that fails in its
// scratch namespace instead of probing on (issue 10 §2: mount errors were
// ignored). The probe runs in a child chrooted into a directory: when the
// root is no mount point, making the mounts private fails (EINVAL); when it
// is one but has no sys directory, mounting the scratch /sys fails (ENOENT).
func TestHostProbeMountErrors(t *testing.T) {
	testenv.Host(t)
	for _, c := range []struct {
		name, want, errno string
		mountpoint        bool
	}{
		{"root not a mount point", "make the scratch namespace's mounts private", "invalid argument", false},
		{"no /sys to mount on", "mount a scratch /sys", "no such file or directory", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			if c.mountpoint {
				// In the test's own mount namespace (testenv.Host).
				if err := unix.Mount(root, root, "", unix.MS_BIND, ""); err != nil {
					t.Fatal(err)
				}
				defer unix.Unmount(root, unix.MNT_DETACH)
			}
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "NETCTL_HELPER_PROBE_CHROOT="+root)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("probe in a chroot at %s: %v\n%s", root, err, out)
			}
			if got := string(out); !strings.Contains(got, c.want) || !strings.Contains(got, c.errno) {
				t.Errorf("error %q, want it to say %q and %q", strings.TrimSpace(got), c.want, c.errno)
			}
		})
	}
}

// TestHostProbeLeavesNoThreadInScratch: after ProbeOffloads the
// process's main thread is in the namespaces it started in. The probe's
// scratch goroutine locks its thread and lets it end with it, but when it
// runs on the main thread (which never ends; GOMAXPROCS=1 makes it the
// one that runs it), that thread stayed in the scratch network and mount
// namespaces, and /proc/PID/ns/net of netctl showed the scratch namespace
// (found by a review: a CNI_NETNS of /proc/self/ns/net went there).
func TestHostProbeLeavesNoThreadInScratch(t *testing.T) {
	testenv.Host(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "NETCTL_HELPER_PROBE_NS=1", "GOMAXPROCS=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("probe child: %v\n%s", err, out)
	}
	var want []string
	for _, ns := range []string{"net", "mnt"} {
		l, err := os.Readlink("/proc/thread-self/ns/" + ns)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, l)
	}
	if got := strings.Fields(string(out)); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("the child's main thread after probing is in %v, want %v (where it started)", got, want)
	}
}
