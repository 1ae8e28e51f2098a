package l2

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io"
	"testing"
)

// bzImage builds the parts of an x86 bzImage that Payload reads: the
// setup header (setup_sects, "HdrS", payload_offset, payload_length) and
// a payload followed by the 4-byte size the build appends.
func bzImage(setupSects byte, off uint32, payload []byte) []byte {
	b := make([]byte, (int(setupSects)+1)*512+int(off))
	if setupSects == 0 {
		b = make([]byte, 5*512+int(off))
	}
	b[0x1f1] = setupSects
	copy(b[0x202:], "HdrS")
	binary.LittleEndian.PutUint32(b[0x248:], off)
	binary.LittleEndian.PutUint32(b[0x24c:], uint32(len(payload)+4))
	b = append(b, payload...)
	return append(b, 1, 2, 3, 4)
}

func TestPayload(t *testing.T) {
	for _, tc := range []struct {
		kind  string
		magic []byte
		sects byte
	}{
		{Zstd, []byte{0x28, 0xb5, 0x2f, 0xfd}, 27},
		{XZ, []byte{0xfd, '7', 'z', 'X', 'Z', 0}, 30},
		{Gzip, []byte{0x1f, 0x8b}, 0}, // 0 means 4 setup sectors
	} {
		want := append(append([]byte{}, tc.magic...), "kernel"...)
		p, kind, err := Payload(bzImage(tc.sects, 0x3c0, want))
		if err != nil || kind != tc.kind || !bytes.Equal(p, want) {
			t.Errorf("%s: Payload = %q, %q, %v; want %q without the appended size", tc.kind, p, kind, err, want)
		}
	}
}

func TestPayloadRefuses(t *testing.T) {
	good := bzImage(27, 0x3c0, []byte{0x28, 0xb5, 0x2f, 0xfd, 9, 9, 9, 9})
	noHdr := bytes.Clone(good)
	copy(noHdr[0x202:], "XXXX")
	long := bytes.Clone(good)
	binary.LittleEndian.PutUint32(long[0x24c:], 1<<31)
	unknown := bzImage(27, 0x3c0, []byte("ELF?????"))
	for name, b := range map[string][]byte{"short": good[:0x100], "no HdrS": noHdr, "length past the end": long, "unknown compression": unknown} {
		if _, _, err := Payload(b); !errors.Is(err, errNotBzImage) {
			t.Errorf("%s: err %v, want errNotBzImage", name, err)
		}
	}
}

func TestInitramfs(t *testing.T) {
	rd, err := Initramfs([]byte("busybox"), []Module{{"failover", []byte("f")}, {"net_failover", []byte("n")}, {"virtio_net", []byte("v")}})
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(rd))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"init\x00", "bin/busybox\x00", "mods/failover.ko\x00", "mods/net_failover.ko\x00", "mods/virtio_net.ko\x00", "failover\nnet_failover\nvirtio_net\n", "TRAILER!!!\x00"} {
		if !bytes.Contains(raw, []byte(name)) {
			t.Errorf("the initramfs has no %q", name)
		}
	}
	if !bytes.Contains(raw, initScript) {
		t.Error("the initramfs does not hold the L2 init")
	}
	if _, err := Initramfs([]byte("busybox"), []Module{{"failover", []byte("f")}}); err == nil {
		t.Error("Initramfs without net_failover and virtio_net: no error")
	}
	// InitramfsWith: the given init instead of the L2 one, and the files.
	rd, err = InitramfsWith([]byte("#!/bin/sh\necho own-init\n"), []byte("busybox"),
		[]Module{{"failover", []byte("f")}, {"net_failover", []byte("n")}, {"virtio_net", []byte("v")}},
		File{Path: "bin/l2agent", Perm: 0o755, Data: []byte("agent-binary")})
	if err != nil {
		t.Fatal(err)
	}
	if zr, err = gzip.NewReader(bytes.NewReader(rd)); err != nil {
		t.Fatal(err)
	}
	if raw, err = io.ReadAll(zr); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"bin/l2agent\x00", "agent-binary", "init\x00", "echo own-init", "mods/virtio_net.ko\x00"} {
		if !bytes.Contains(raw, []byte(want)) {
			t.Errorf("InitramfsWith: the initramfs has no %q", want)
		}
	}
	if bytes.Contains(raw, initScript) {
		t.Error("InitramfsWith: the initramfs holds the L2 init, not the one given")
	}
}
