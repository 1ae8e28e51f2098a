package stats

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netctl/netctl/internal/fuzzalloc"
)

// seeds reads the real samples in testdata whose names match glob.
func seeds(f *testing.F, glob string) {
	f.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", glob))
	if err != nil || len(files) == 0 {
		f.Fatalf("no testdata/%s samples", glob)
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

func FuzzParseStat(f *testing.F) {
	seeds(f, "proc-stat-*.txt")
	f.Add([]byte("1 (a) b) S 2 0 0 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 5 0 0"))
	f.Add([]byte("1 (x"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var s taskStat
		var err error
		fuzzalloc.Check(t, len(b), func() { s, err = parseStat(b) })
		if err == nil && (len(s.Comm) > maxStat || s.CPUSeconds() < 0) {
			t.Errorf("parseStat(%q) = %+v", b, s)
		}
	})
}

func FuzzParseGPA2HVA(f *testing.F) {
	seeds(f, "qemu-7.2-gpa2hva*.txt")
	f.Add([]byte("Host virtual address for 0x1 (pc.ram) is 0x"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var v uint64
		var err error
		fuzzalloc.Check(t, len(b), func() { v, err = parseGPA2HVA(string(b)) })
		if err == nil && (v == 0 || !strings.Contains(string(b), "Host virtual address")) {
			t.Errorf("parseGPA2HVA(%q) = %#x", b, v)
		}
	})
}

func FuzzParseQueueStatus(f *testing.F) {
	seeds(f, "qemu-7.2-queue-status.json")
	f.Add([]byte(`{"avail": 140000000, "avail-phys": 65536, "avail-size": 518, "call": 40, "desc": 140000001, "desc-phys": 67584, "desc-size": 4096, "kick": 39, "name": "virtio-net", "num": 256, "used": 140000002, "used-phys": 69632, "used-size": 2054}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, parse := range []func([]byte) (queueAddrs, error){parseQueueStatus, parseVhostQueueStatus} {
			var a queueAddrs
			var err error
			fuzzalloc.Check(t, len(b), func() { a, err = parse(b) })
			if err == nil && (a.Avail == 0 || a.Used == 0 || a.Avail%2 != 0 || a.Num < 0) {
				t.Errorf("parse(%q) = %+v", b, a)
			}
		}
	})
}

func FuzzParseVirtio(f *testing.F) {
	seeds(f, "qemu-7.2-virtio*.json")
	f.Add([]byte(`[{"name": "virtio-net", "path": "/x"}, {"name": "virtio-net", "path": "/virtio-backend"}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzalloc.Check(t, len(b), func() { parseVirtioStatus(b); parseVirtioList(b) })
		if st, err := parseVirtioStatus(b); err == nil {
			if st.NumVQs < 0 || st.NumVQs > maxVQs || len(st.Status.Statuses) > maxStrings {
				t.Errorf("parseVirtioStatus(%q) = %+v", b, st)
			}
			_ = st.fingerprint()
			_ = statusWords(st)
		}
		if nets, err := parseVirtioList(b); err == nil {
			if len(nets) > maxDevices {
				t.Errorf("%d devices", len(nets))
			}
			for _, p := range nets {
				_ = nicID(p)
				// describeNIC takes the device's QOM path off the end.
				if d, ok := strings.CutSuffix(p, "/virtio-backend"); !ok || !strings.HasPrefix(d, "/") || len(d) < 2 {
					t.Errorf("parseVirtioList(%q) gave %q, not DEVICE/virtio-backend", b, p)
				}
			}
		}
	})
}

func FuzzParseIff(f *testing.F) {
	seeds(f, "fdinfo-*.txt")
	f.Fuzz(func(t *testing.T, b []byte) {
		var name string
		fuzzalloc.Check(t, len(b), func() { name = parseIff(b) })
		if len(name) >= 16 || strings.ContainsAny(name, "/ \t\n") {
			t.Errorf("parseIff(%q) = %q", b, name)
		}
	})
}
