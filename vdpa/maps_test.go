package vdpa

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// realMaps is /proc/self/maps as Linux writes it: a binary, the heap, a
// memfd mapped MAP_SHARED (netctl's guest memory), a deleted shm file,
// anonymous shared memory, a private anonymous mapping, the stack, and
// the vsyscall page at the top.
const realMaps = `564b8beea000-564b8beec000 r--p 00000000 fe:00 247278                     /usr/bin/netctl
564bb0cd4000-564bb0cf5000 rw-p 00000000 00:00 0                          [heap]
7f0000000000-7f0000400000 rw-s 00000000 00:01 1042                       /memfd:guest (deleted)
7f0000400000-7f0000600000 rw-s 00000000 00:19 77                         /dev/shm/guest-ram
7f0000600000-7f0000800000 rw-s 00000000 00:01 5                          /dev/zero (deleted)
7f0000800000-7f0000a00000 rw-p 00000000 00:00 0 
7ffc3f0e2000-7ffc3f103000 rw-p 00000000 00:00 0                          [stack]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]
`

func TestSharedFileMappingCheck(t *testing.T) {
	for _, tc := range []struct {
		addr, size uint64
		ok         bool
		want       string
	}{
		{0x7f0000000000, 0x400000, true, ""}, // the memfd
		{0x7f0000100000, 0x500000, true, ""}, // memfd, then /dev/shm, adjacent
		{0x7f0000000000, 0x800000, true, ""}, // memfd, shm, shared anonymous (shmem): the kernel maps it
		{0x7f0000000000, 0x900000, false, "not a shared mapping"},
		{0x7f0000800000, 0x1000, false, "not a shared mapping"},
		{0x564bb0cd4000, 0x1000, false, "[heap]"},
		{0x7e0000000000, 0x1000, false, "not mapped"},
		{0x7f0000300000, 0x100000000, false, "not a shared mapping"},
		{0xffffffffff600000, 0x1000, false, "not a shared mapping"},
	} {
		err := checkSharedFileMappingIn(strings.NewReader(realMaps), tc.addr, tc.size)
		if tc.ok != (err == nil) || (err != nil && (!strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrInvalid))) {
			t.Errorf("[%#x, +%#x): %v, want ok=%v (%q)", tc.addr, tc.size, err, tc.ok, tc.want)
		}
	}
	// Malformed text is an error, never a panic (a perms field of 2
	// bytes used to index out of range).
	for _, bad := range []string{"1000-2000 rw 00000000 00:00 0 /x\n", "zz-2000 rw-s 0 00:00 0 /x\n", "2000-1000 rw-s 0 00:00 0 /x\n", "1000 rw-s 0 00:00 0 /x\n"} {
		if err := checkSharedFileMappingIn(strings.NewReader(bad), 0x1000, 0x10); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	// A line longer than any the kernel writes is an error, not an
	// unbounded read.
	long := "1000-2000 rw-s 00000000 00:00 0 /" + strings.Repeat("a", 1<<20) + "\n"
	if err := checkSharedFileMappingIn(strings.NewReader(long), 0x1000, 0x10); err == nil {
		t.Error("a 1 MiB line: no error")
	}
}

func TestSharedFileMappingOfThisProcess(t *testing.T) {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		l, ok := parseMapsLine(line)
		if !ok {
			t.Fatalf("this kernel's line %q does not parse", line)
		}
		if got, ok := parseMapsLine(formatMapsLine(l)); !ok || got != l {
			t.Errorf("round trip of %q: %+v, want %+v", line, got, l)
		}
	}
}
