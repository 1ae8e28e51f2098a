package l2

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// Compression of a bzImage payload.
const (
	Zstd = "zstd" // Debian 6.12
	XZ   = "xz"   // Debian 6.1
	Gzip = "gzip"
)

var magics = []struct {
	kind  string
	magic []byte
}{
	{Zstd, []byte{0x28, 0xb5, 0x2f, 0xfd}},
	{XZ, []byte{0xfd, '7', 'z', 'X', 'Z', 0}},
	{Gzip, []byte{0x1f, 0x8b}},
}

// errNotBzImage is returned for anything that is not an x86 bzImage with a
// compressed payload this package knows.
var errNotBzImage = errors.New("not an x86 bzImage with a zstd, xz or gzip payload")

// Payload returns the compressed kernel (the ELF vmlinux once
// decompressed) inside an x86 bzImage and its compression, from the setup
// header's payload_offset and payload_length
// (Documentation/arch/x86/boot.rst). The build appends the 4-byte
// uncompressed size to the payload; Payload leaves it out, since zstd
// refuses trailing bytes.
func Payload(bz []byte) ([]byte, string, error) {
	if len(bz) < 0x250 || string(bz[0x202:0x206]) != "HdrS" {
		return nil, "", fmt.Errorf("%w: no setup header", errNotBzImage)
	}
	setup := int(bz[0x1f1])
	if setup == 0 {
		setup = 4
	}
	off := binary.LittleEndian.Uint32(bz[0x248:])
	n := binary.LittleEndian.Uint32(bz[0x24c:])
	start := uint64(setup+1)*512 + uint64(off)
	end := start + uint64(n)
	if n < 8 || end > uint64(len(bz)) {
		return nil, "", fmt.Errorf("%w: payload %d+%d outside the %d-byte file", errNotBzImage, start, n, len(bz))
	}
	p := bz[start : end-4]
	for _, m := range magics {
		if bytes.HasPrefix(p, m.magic) {
			return p, m.kind, nil
		}
	}
	return nil, "", fmt.Errorf("%w: payload starts % x", errNotBzImage, p[:min(6, len(p))])
}
