package diagnose

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/virtio"
)

// statusWith is the real QEMU 7.2 status with one member replaced.
func statusWith(t *testing.T, key string, v any) string {
	t.Helper()
	var st map[string]any
	if err := json.Unmarshal(readFile(t, "testdata/qemu-7.2-status.json"), &st); err != nil {
		t.Fatal(err)
	}
	st[key] = v
	b, _ := json.Marshal(st)
	return string(b)
}

func manyNames(n int) map[string]any {
	names := make([]string, n)
	for i := range names {
		names[i] = "VIRTIO_NET_F_CSUM: x"
	}
	return map[string]any{"dev-features": names, "transports": []string{}}
}

// TestLoadMalformed: truncated, oversized, wrong-typed and out-of-range
// input gives an error that wraps ErrInvalid and says what is wrong, and
// nothing else.
func TestLoadMalformed(t *testing.T) {
	st := string(readFile(t, "testdata/qemu-7.2-status.json"))
	snap := `{"format":"netctl-diagnose/1","virtio_status":` + st
	for _, c := range []struct{ name, body, want string }{
		{"empty", ``, "truncated JSON"},
		{"white space", "  \n", "truncated JSON"},
		{"truncated snapshot", snap[:len(snap)/2], "truncated JSON"},
		{"truncated bare status", st[:strings.LastIndex(st, "}")], "truncated JSON"},
		{"not JSON", `format: netctl`, "not JSON"},
		{"trailing garbage", snap + `} x`, "not JSON"},
		{"array", `[1,2]`, "a JSON array, not an object"},
		{"string", `"netctl-diagnose/1"`, "a JSON string, not an object"},
		{"null", `null`, "format \"\""},
		{"format a number", `{"format":5}`, `"format" is a JSON number`},
		{"other format", `{"format":"other"}`, "--save FILE"},
		{"no status", `{"format":"netctl-diagnose/1"}`, "no virtio_status"},
		{"null status", `{"format":"netctl-diagnose/1","virtio_status":null}`, "no virtio_status"},
		{"status an array", `{"format":"netctl-diagnose/1","virtio_status":[1]}`, "not a JSON object"},
		{"tap a string", snap + `,"tap":"vnet0"}`, `"tap" is a JSON string`},
		{"props not bools", snap + `,"props":{"csum":"on"}}`, `"props" is a JSON string`},
		{"queues a string", snap + `,"tap":{"name":"t","queues":"2"}}`, `"tap.queues" is a JSON string`},
		{"vdpa features negative", snap + `,"vdpa":{"device":"v","features":-1}}`, `"vdpa.features" is a JSON number -1`},
		{"host probe a list", snap + `,"host":[1]}`, "not netctl probe --json output"},
		{"host offloads a string", snap + `,"host":{"tap":{"offloads":"csum"}}}`, "not netctl probe --json output"},
		{"return an array", `{"return":[1],"id":"libvirt-1"}`, "not a JSON object"},
		{"return null", `{"return":null,"id":"libvirt-1"}`, "not a JSON object"},
		{"QMP error reply", `{"id":"libvirt-7","error":{"class":"GenericError","desc":"Path '/machine/peripheral/net0/virtio-backend' is not a VirtIODevice"}}`,
			"QEMU's error reply (GenericError: Path '/machine/peripheral/net0/virtio-backend' is not a VirtIODevice)"},
		{"device id a string", `{"device-id":"1"}`, `"device-id" is a JSON string`},
		{"virtio-blk", statusWith(t, "device-id", 2), "not virtio-net"},
		{"guest features a string", statusWith(t, "guest-features", "CSUM"), "x-query-virtio-status reply"},
		{"unknown word negative", statusWith(t, "host-features", map[string]any{"unknown-dev-features": -1}), "x-query-virtio-status reply"},
		{"too many names", statusWith(t, "host-features", manyNames(129)), "lists 129 feature names in host-features; a virtio device has at most 128"},
		{"too many statuses", statusWith(t, "status", map[string]any{"statuses": make([]string, 17)}), "17 device statuses; there are at most 16"},
		{"too many errors", snap + `,"errors":[` + strings.Repeat(`"x",`, maxEntries) + `"x"]}`, `"errors" has 1025 entries (at most 1024)`},
		{"too many tap offloads", snap + `,"tap":{"name":"t","offloads":[` + strings.Repeat(`"csum",`, maxEntries) + `"csum"]}}`, `"tap.offloads" has 1025 entries`},
		{"too many host offloads", snap + `,"host":{"tap":{"offloads":[` + strings.Repeat(`"csum",`, maxEntries) + `"csum"]}}}`, `"host.tap.offloads" has 1025 entries`},
		{"deep nesting", strings.Repeat("[", 20000) + strings.Repeat("]", 20000), "not JSON"},
		{"oversized", `{"format":"netctl-diagnose/1","virtio_status":` + st + `,"errors":["` + strings.Repeat("x", MaxSnapshotSize) + `"]}`, "over 4 MiB"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := Decode([]byte(c.body))
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) || s != nil {
				t.Errorf("Decode: %v, %v; want an error wrapping ErrInvalid that says %q", s, err, c.want)
			}
		})
	}
	// A named case that loads: many unknown names, within the bounds.
	if _, err := Decode([]byte(statusWith(t, "host-features", manyNames(128)))); err != nil {
		t.Errorf("128 names: %v", err)
	}
}

// TestLoadOversizedFile: Load reads no more than MaxSnapshotSize+1 bytes
// of a huge file before it refuses it.
func TestLoadOversizedFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "huge.json")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(8 << 30); err != nil { // sparse: 8 GiB of zero bytes
		t.Fatal(err)
	}
	f.Close()
	start := time.Now()
	_, err = Load(p)
	if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), p+": over 4 MiB") {
		t.Errorf("Load of an 8 GiB file: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Load took %v on an 8 GiB file: it read it all", d)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "none.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}

// TestLoadSaveLoad: a real snapshot (netctl diagnose --save against QEMU
// 7.2 and a 6.12 guest, TestHostDiagnoseRealQEMU) and the virsh form load,
// save and load again to the same bytes and the same report.
func TestLoadSaveLoad(t *testing.T) {
	st := readFile(t, "testdata/qemu-7.2-status.json")
	for name, body := range map[string][]byte{
		"snapshot":   readFile(t, "testdata/snapshot-qemu-7.2-guest-6.12.json"),
		"virsh":      []byte(`{"return":` + string(st) + `,"id":"libvirt-42"}`),
		"bare":       st,
		"synthetic":  mustEncode(t, real72(t, "6.1")),
		"no backend": []byte(`{"format":"netctl-diagnose/1","virtio_status":` + string(st) + `,"netdev":{"id":"n0","type":"user"}}`),
	} {
		t.Run(name, func(t *testing.T) {
			s1, err := Decode(body)
			if err != nil {
				t.Fatal(err)
			}
			b1 := mustEncode(t, s1)
			p := filepath.Join(t.TempDir(), "s.json")
			if err := s1.Save(p); err != nil {
				t.Fatal(err)
			}
			s2, err := Load(p)
			if err != nil {
				t.Fatal(err)
			}
			if b2 := mustEncode(t, s2); !bytes.Equal(b1, b2) {
				t.Errorf("Load(Save(s)) differs:\n%s\n%s", b1, b2)
			}
			r1, err1 := Explain(s1)
			r2, err2 := Explain(s2)
			j1, _ := json.Marshal(r1)
			j2, _ := json.Marshal(r2)
			if err1 != nil || err2 != nil || !bytes.Equal(j1, j2) {
				t.Errorf("reports differ: %v %v\n%s\n%s", err1, err2, j1, j2)
			}
		})
	}
}

func mustEncode(t *testing.T, s *Snapshot) []byte {
	t.Helper()
	b, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSaveKeepsCommandLineRead: a command line that was read and sets no
// feature property (Cmdline empty, not nil) stays read through --save and
// --from, so the saved snapshot explains a property that reads off the
// same way as the live run: neither the user nor vhost-net turned it off,
// the machine type's compat settings or a -global did.
func TestSaveKeepsCommandLineRead(t *testing.T) {
	offer := (linuxGuest | virtio.IndirectDesc | virtio.RingReset) &^ virtio.NetCtrlVLAN
	live := tapSnapshot(t, offer, offer, "6.12", "csum", "tso4", "tso6", "tso_ecn")
	live.Status = withVhost(t, live.Status, vhostNet612, offer&vhostKernelBits)
	live.Driver, live.Defaults, live.Cmdline = "virtio-net-pci", defaults(t), map[string]string{}
	live.Props["ctrl_vlan"] = false
	p := filepath.Join(t.TempDir(), "s.json")
	if err := live.Save(p); err != nil {
		t.Fatal(err)
	}
	saved, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if saved.Cmdline == nil {
		t.Errorf("the saved snapshot lost the command line that was read (empty): it loads as not read")
	}
	r1, err1 := Explain(live)
	r2, err2 := Explain(saved)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	want := "the NIC's property ctrl_vlan is off although virtio-net-pci defaults to on and the command line does not set it: " +
		"the machine type's compat settings or a -global turn it off"
	for name, r := range map[string]*Report{"live": r1, "--save then --from": r2} {
		if got := row(t, r, "CTRL_VLAN"); got.Layer != "property" || got.Reason != want {
			t.Errorf("%s: CTRL_VLAN %+v\nwant %q", name, got, want)
		}
	}
}
