package vdpa

import (
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/netctl/netctl/virtio"

	"github.com/netctl/netctl/internal/fuzzalloc"
)

// Seeds: the attribute bytes of the kernel's replies as Linux 6.12 sent
// them in the VM (testdata/replies; TestVMRealRepliesRoundTrip -v prints
// them), and replies the encoders build in the kernel's shape.

func mustEncode(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// addSeeds adds every file of testdata/replies/<kind>-*.bin (raw attribute
// bytes captured from a real kernel) as a seed.
func addSeeds(f *testing.F, kind string) {
	files, _ := filepath.Glob(filepath.Join("testdata", "replies", kind+"-*.bin"))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

func FuzzDecodeMgmtDev(f *testing.F) {
	addSeeds(f, "mgmtdev")
	f.Add(mustEncode(encodeMgmtDev(MgmtDev{Name: "vduse", Classes: []string{"net", "block"}})))
	f.Add(mustEncode(encodeMgmtDev(MgmtDev{BusName: "pci", Name: "0000:65:00.2", Classes: []string{"net"}, MaxVQs: 16,
		HasMaxVQs: true, DevFeatures: virtio.Version1 | virtio.NetMrgRxbuf, HasDevFeatures: true})))
	f.Fuzz(func(t *testing.T, data []byte) {
		var d MgmtDev
		var err error
		fuzzalloc.Check(t, len(data), func() { d, err = decodeMgmtDev(data) })
		if err != nil {
			return
		}
		if len(d.Classes) > 63 || len(d.Name) > maxName || len(d.BusName) > maxName {
			t.Fatalf("unbounded: %+v", d)
		}
		b, err := encodeMgmtDev(d)
		if err != nil {
			t.Fatalf("encode %+v: %v", d, err)
		}
		d2, err := decodeMgmtDev(b)
		if err != nil || !reflect.DeepEqual(d, d2) {
			t.Fatalf("round trip: %+v -> %+v, %v", d, d2, err)
		}
	})
}

func FuzzDecodeDevice(f *testing.F) {
	addSeeds(f, "dev")
	f.Add(mustEncode(encodeDevice(Device{Name: "vdpa0", MgmtDev: "vduse", DeviceID: 1, MaxVQs: 2, MaxVQSize: 256, MinVQSize: 1})))
	f.Add(mustEncode(encodeDevice(Device{Name: "vdpa1", MgmtDev: "pci/0000:65:00.2", DeviceID: 1, VendorID: 0x15b3, MaxVQs: 17, MaxVQSize: 256})))
	f.Fuzz(func(t *testing.T, data []byte) {
		var d Device
		var err error
		fuzzalloc.Check(t, len(data), func() { d, err = decodeDevice(data) })
		if err != nil {
			return
		}
		if len(d.Name) > maxName || len(d.MgmtDev) > 2*maxName+1 {
			t.Fatalf("unbounded: %+v", d)
		}
		d2, err := decodeDevice(mustEncode(encodeDevice(d)))
		if err != nil || !reflect.DeepEqual(d, d2) {
			t.Fatalf("round trip: %+v -> %+v, %v", d, d2, err)
		}
	})
}

var seedConfig = Config{Name: "vdpa0", DeviceID: 1, MAC: net.HardwareAddr{2, 0, 0, 0, 0x0d, 1}, HasStatus: true, LinkUp: true,
	MTU: 1500, MaxVQP: 1, Features: virtio.Version1 | virtio.AccessPlatform | virtio.NetMAC,
	Negotiated: virtio.Version1 | virtio.NetMAC, HasNegotiated: true}

func FuzzDecodeConfig(f *testing.F) {
	addSeeds(f, "config")
	f.Add(mustEncode(encodeConfig(seedConfig)))
	f.Add(mustEncode(encodeConfig(Config{Name: "v", DeviceID: 2})))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c Config
		var err error
		fuzzalloc.Check(t, len(data), func() { c, err = decodeConfig(data) })
		if err != nil {
			return
		}
		if len(c.Name) > maxName || (c.MAC != nil && len(c.MAC) != 6) {
			t.Fatalf("unbounded: %+v", c)
		}
		c2, err := decodeConfig(mustEncode(encodeConfig(c)))
		if err != nil || !reflect.DeepEqual(c, c2) {
			t.Fatalf("round trip: %+v -> %+v, %v", c, c2, err)
		}
	})
}

// FuzzDecodeVStats: no driver the test VM has answers VDPA_CMD_DEV_VSTATS_GET
// (VDUSE has no get_vendor_vq_stats: the kernel says EOPNOTSUPP, which
// stats' and the exporter's VM tests assert), so there is no real reply to
// capture; addSeeds takes testdata/replies/vstats-*.bin should one be
// captured on hardware. The seed is built in the shape mlx5_vdpa sends
// (drivers/vdpa/mlx5/net/mlx5_vnet.c: received_desc and completed_desc
// name/value pairs after the device name and negotiated features).
func FuzzDecodeVStats(f *testing.F) {
	addSeeds(f, "vstats")
	f.Add(mustEncode(encodeVStats(Config{Name: "vdpa0", DeviceID: 1, Negotiated: virtio.Version1, HasNegotiated: true},
		[]VendorStat{{"received_desc", 42}, {"completed_desc", 41}})))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c Config
		var stats []VendorStat
		var err error
		fuzzalloc.Check(t, len(data), func() { c, stats, err = decodeVStats(data) })
		if err != nil {
			return
		}
		if len(stats) > len(data)/16 {
			t.Fatalf("%d stats from %d bytes", len(stats), len(data))
		}
		c2, stats2, err := decodeVStats(mustEncode(encodeVStats(c, stats)))
		if err != nil || !reflect.DeepEqual(c, c2) || !reflect.DeepEqual(stats, stats2) {
			t.Fatalf("round trip: %+v %+v -> %+v %+v, %v", c, stats, c2, stats2, err)
		}
	})
}

func FuzzMapsLine(f *testing.F) {
	for _, l := range strings.Split(realMaps, "\n") {
		f.Add(l)
	}
	if b, err := os.ReadFile("/proc/self/maps"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			f.Add(l)
		}
	}
	f.Fuzz(func(t *testing.T, line string) {
		// The whole check over arbitrary text: an error or a verdict, no panic.
		var l mapsLine
		var ok bool
		fuzzalloc.Check(t, len(line), func() {
			checkSharedFileMappingIn(strings.NewReader(line), 0x1000, 0x1000)
			l, ok = parseMapsLine(line)
		})
		if !ok {
			return
		}
		if strings.Contains(l.path, "\n") {
			return // one line of text holds no newline; the scanner splits there
		}
		l2, ok := parseMapsLine(formatMapsLine(l))
		if !ok || l2 != l {
			t.Fatalf("round trip: %+v -> %+v (%v)", l, l2, ok)
		}
	})
}

// FuzzParseDevNumber: sysfs dev files are outside input to Holders and
// DeviceOfVhost. Seeds: literals in the kernel's format (/dev/null's 1:3,
// /dev/vhost-net's misc 10:232, a dynamic major, the largest dev_t
// numbers) and the running kernel's own dev files, read now. No panic, allocation bounded, and a
// number parses back from what devString prints.
func FuzzParseDevNumber(f *testing.F) {
	for _, s := range []string{"240:0\n", "1:3\n", "10:232\n", "4095:1048575\n", "511:1\n"} {
		f.Add([]byte(s))
	}
	// And the running kernel's own dev files, read now.
	live, _ := filepath.Glob("/sys/dev/char/*/dev")
	for _, p := range append([]string{"/sys/class/misc/tun/dev", "/sys/dev/char/1:3/dev"}, live[:min(len(live), 8)]...) {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var rdev uint64
		var err error
		fuzzalloc.Check(t, len(b), func() { rdev, err = parseDevNumber(b) })
		if err != nil {
			return
		}
		rdev2, err := parseDevNumber([]byte(devString(rdev) + "\n"))
		if err != nil || rdev2 != rdev {
			t.Fatalf("round trip %q: %#x -> %#x, %v", b, rdev, rdev2, err)
		}
	})
}
