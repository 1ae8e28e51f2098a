package gather

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/netctl/netctl/internal/fuzzalloc"
)

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestParseTunFdinfo: the real fdinfo of QEMU's tap fd, and odd ones.
func TestParseTunFdinfo(t *testing.T) {
	for _, c := range []struct {
		name, in, want, err string
		tun                 bool
	}{
		{"QEMU's tap (real)", string(readTestdata(t, "fdinfo-qemu-tap.txt")), "nctldiag0", "", true},
		{"an eventfd (real)", string(readTestdata(t, "fdinfo-qemu-eventfd.txt")), "", "", false},
		// A nested QEMU run through chroot /host: its tap reads as
		// /host/dev/net/tun from outside, /dev/vhost-net as /host/dev/vhost-net.
		{"QEMU's tap in a chroot (real)", string(readTestdata(t, "fdinfo-nested-chroot-tap.txt")), "l2tap1", "", true},
		{"QEMU's vhost-net in a chroot (real)", string(readTestdata(t, "fdinfo-nested-chroot-vhost-net.txt")), "", "", false},
		{"detached tun", "pos:\t0\nflags:\t02\nmnt_id:\t24\nino:\t105\niff:\t\n", "", "", true},
		{"empty", "", "", "", false},
		{"no newline at the end", "iff:\tvnet0", "vnet0", "", true},
		{"two iff lines", "iff:\tvnet0\niff:\tvnet1\n", "", "two iff: lines", false},
		{"16 bytes", "iff:\t0123456789abcdef\n", "", "not an interface name", false},
		{"a slash", "iff:\t../../etc\n", "", "not an interface name", false},
		{"a colon", "iff:\teth0:1\n", "", "not an interface name", false},
		{"white space inside", "iff:\tvnet 0\n", "", "not an interface name", false},
		{"dot dot", "iff:\t..\n", "", "not an interface name", false},
		{"NUL", "iff:\tvn\x00et\n", "", "not an interface name", false}, // ifr_name is a C string: tun cannot print one
		{"binary", "\xff\xfe\x00iff:\x00\n", "", "", false},
	} {
		got, tun, err := parseTunFdinfo([]byte(c.in))
		if c.err == "" && (err != nil || got != c.want || tun != c.tun) {
			t.Errorf("%s: %q, tun %v, %v; want %q, tun %v", c.name, got, tun, err, c.want, c.tun)
		}
		if c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err) || got != "") {
			t.Errorf("%s: %q, %v; want an error saying %q", c.name, got, err, c.err)
		}
	}
}

func TestMacvtapIndex(t *testing.T) {
	for in, want := range map[string]int{
		"/dev/tap42": 42, "/tmp/netctl-x/tap7": 7, "/tmp/netctl-macvtap-1/tap9 (deleted)": 9, "/dev/tap9 (deleted) (deleted)": 0, "/dev/tap2147483647": 2147483647,
		"/dev/tap0": 0, "/dev/tap": 0, "/dev/tap+5": 0, "/dev/tap-5": 0, "/dev/tap05": 0,
		"/dev/tap2147483648": 0, "/dev/tap99999999999999999999": 0, "/dev/net/tun": 0, "/dev/tapx": 0,
	} {
		if got := macvtapIndex(in); got != want {
			t.Errorf("macvtapIndex(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestPassedFDs(t *testing.T) {
	if got := passedFDs(map[string]string{"fds": "27:29", "vhostfds": "30:31"}); !slices.Equal(got, []int{27, 29}) {
		t.Errorf("fds=27:29: %v", got)
	}
	if got := passedFDs(map[string]string{"fd": "-1", "fds": "+3:x:99999999999:4"}); !slices.Equal(got, []int{4}) {
		t.Errorf("odd numbers: %v", got)
	}
	if got := passedFDs(map[string]string{"fds": strings.Repeat("1:", 100000)}); len(got) != maxPassedFDs {
		t.Errorf("100000 fds: %d kept", len(got))
	}
}

// FuzzProcFD: the parsers of what /proc and info network say about QEMU's
// descriptors (tun's fdinfo, a macvtap node's name, fd=/fds=), seeded
// with a real QEMU's tap and eventfd fdinfo. No panic; whatever is
// returned is an interface name, an interface index or descriptor numbers.
func FuzzProcFD(f *testing.F) {
	f.Add(readTestdata(f, "fdinfo-qemu-tap.txt"), "/dev/net/tun", "27:29")
	f.Add(readTestdata(f, "fdinfo-qemu-eventfd.txt"), "/dev/tap42", "9")
	f.Add(readTestdata(f, "fdinfo-nested-chroot-tap.txt"), "/host/dev/net/tun", "14")
	f.Add(readTestdata(f, "fdinfo-nested-chroot-vhost-net.txt"), "/host/dev/vhost-net", "15")
	f.Fuzz(func(t *testing.T, fdinfo []byte, target, fds string) {
		var iff string
		var tun bool
		var err error
		fuzzalloc.Check(t, len(fdinfo), func() { iff, tun, err = parseTunFdinfo(fdinfo) })
		if err == nil && iff != "" && (!validIfName(iff) || !tun) {
			t.Fatalf("iff %q, tun %v", iff, tun)
		}
		if n := macvtapIndex(target); n < 0 || int64(n) > 1<<31-1 {
			t.Fatalf("macvtapIndex(%q) = %d", target, n)
		}
		got := passedFDs(map[string]string{"fds": fds})
		if len(got) > maxPassedFDs {
			t.Fatalf("%d fds", len(got))
		}
		for _, n := range got {
			if n < 0 {
				t.Fatalf("fd %d", n)
			}
		}
	})
}
