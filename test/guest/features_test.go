package guest

import (
	"context"
	"errors"
	"testing"

	"github.com/netctl/netctl/internal/errs"

	"github.com/netctl/netctl/internal/fuzzalloc"
)

// realWord is /sys/class/net/eth0/device/features of the 6.12 guest on a
// hotplugged 4-queue NIC (QEMU 7.2, vhost=off): 0x10130efffa7.
const realWord = "1110010111111111111101110000110010000000100000000000000000000000"

func TestParseFeatures(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{realWord + "\n", 0x10130efffa7, true},
		{"1", 1, true},
		{"01", 2, true},
		{"", 0, false},
		{"102", 0, false},
		{realWord + "1", 0, false},
	} {
		got, err := ParseFeatures(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseFeatures(%q) = %#x, %v", c.in, got, err)
		}
	}
}

func FuzzParseFeatures(f *testing.F) {
	f.Add(realWord)
	f.Add("0000000000000000000000000000000000000000000000000000000000000000\n")
	f.Fuzz(func(t *testing.T, s string) {
		var w uint64
		var err error
		fuzzalloc.Check(t, len(s), func() { w, err = ParseFeatures(s) })
		if err != nil {
			return
		}
		// What parses is bits: print it back the kernel's way.
		for i := 0; i < 64; i++ {
			if w&(1<<i) != 0 && i >= len(s) {
				t.Fatalf("%q: bit %d set beyond the input", s, i)
			}
		}
	})
}

// TestBootRefusesBadOptions: bad options are refused before anything
// starts.
func TestBootRefusesBadOptions(t *testing.T) {
	for _, o := range []Options{{Machine: "virt"}, {Machine: "q35", RootPorts: 31}, {RootPorts: -1}, {Kernel: "5.10"}} {
		if g, err := Boot(context.Background(), o); err == nil {
			g.Close()
			t.Errorf("Boot(%+v) booted", o)
		} else if !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("Boot(%+v): %v, want ErrInvalid", o, err)
		}
	}
}
