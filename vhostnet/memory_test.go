package vhostnet

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateMemTable(t *testing.T) {
	const g = 1 << 30
	for _, c := range []struct {
		name    string
		regions []MemoryRegion
		max     int
		want    string // "" for valid
	}{
		{"empty", nil, 64, ""},
		{"one", []MemoryRegion{{0, g, 0x7f0000000000}}, 64, ""},
		{"adjacent", []MemoryRegion{{0, g, 0x10000}, {g, g, 0x10000}}, 64, ""},
		{"unsorted disjoint", []MemoryRegion{{4 * g, g, 0x10000}, {0, g, 0x10000}}, 64, ""},
		{"same userspace memory twice", []MemoryRegion{{0, 4096, 0x10000}, {g, 4096, 0x10000}}, 64, ""},
		{"top of the space", []MemoryRegion{{^uint64(0) - 4095, 4096, 0x10000}}, 64, ""},
		{"size 0", []MemoryRegion{{0, 0, 0x10000}}, 64, "region 0 has size 0"},
		{"overlap", []MemoryRegion{{0, g, 0x10000}, {g - 4096, 8192, 0x10000}}, 64, "regions 0 [0x0, 0x3fffffff] and 1 [0x3ffff000, 0x40000fff] overlap"},
		{"overlap unsorted", []MemoryRegion{{g, g, 0x10000}, {0, 4 * g, 0x10000}}, 64, "regions 1 [0x0, 0xffffffff] and 0 [0x40000000, 0x7fffffff] overlap"},
		{"same start", []MemoryRegion{{0, 4096, 0x10000}, {0, 4096, 0x20000}}, 64, "overlap"},
		{"contained", []MemoryRegion{{0, 4 * g, 0x10000}, {g, 4096, 0x20000}}, 64, "overlap"},
		{"gpa wraps", []MemoryRegion{{^uint64(0) - 4095, 8192, 0x10000}}, 64, "guest-physical 0xfffffffffffff000 + size 0x2000 wraps"},
		{"uva wraps", []MemoryRegion{{0, 8192, ^uint64(0)}}, 64, "userspace address 0xffffffffffffffff + size 0x2000 wraps"},
		{"too many", make([]MemoryRegion, 3), 2, "3 memory regions, but the vhost module allows 0 to 2"},
	} {
		err := validateMemTable(c.regions, c.max)
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: %v, want it valid", c.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrInvalid saying %q", c.name, err, c.want)
		}
	}
}

// TestSetMemTableRefusesBeforeTheKernel: a bad table is refused on a closed
// device with ErrInvalid, not ErrClosed: nothing reached the kernel.
func TestSetMemTableRefusesBeforeTheKernel(t *testing.T) {
	d := &Device{fd: -1}
	err := d.SetMemTable([]MemoryRegion{{0, 8192, 0x10000}, {4096, 4096, 0x10000}})
	if !errors.Is(err, ErrInvalid) || errors.Is(err, ErrClosed) {
		t.Errorf("overlapping table: %v, want ErrInvalid before any ioctl", err)
	}
	if err := d.SetMemTable([]MemoryRegion{{0, 4096, 0x10000}}); !errors.Is(err, ErrClosed) {
		t.Errorf("valid table on a closed device: %v, want ErrClosed", err)
	}
}
