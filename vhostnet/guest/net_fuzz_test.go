package guest

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/netctl/netctl/internal/fuzzalloc"
)

// realHeaders are 12-byte virtio-net headers that Linux 6.18's tun wrote
// before frames it sent to a vnet_hdr tap with TUN_F_CSUM|TSO4|TSO6
// (captured on the development machine, 2026-12-01, in a network
// namespace): a UDP datagram (NEEDS_CSUM, csum_start 34, csum_offset 6),
// a TCP SYN (csum_offset 16) and an IPv6 neighbour solicitation (no
// offload: all zero). The last is a 64 KiB TCPv4 GSO header in the shape
// the same tap gives a TSO frame (gso_type TCPV4, hdr_len 66, gso_size
// 1448), with num_buffers 1 as vhost-net writes it with MRG_RXBUF.
var realHeaders = []string{
	"010000000000220006000000",
	"010000000000220010000000",
	"000000000000000000000000",
	"01014200a805220010000100",
}

// FuzzParseNetHdr: the header vhost-net writes into a receive buffer is
// outside input to the driver. Any bytes and size give a header or an
// error, never a panic, without allocating; a header encodes (Append) to
// the bytes it came from and parses back to itself.
func FuzzParseNetHdr(f *testing.F) {
	for _, h := range realHeaders {
		b, err := hex.DecodeString(h)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, 12)
		f.Add(b[:10], 10)
	}
	f.Add([]byte{1, 2, 3}, 12)
	f.Fuzz(func(t *testing.T, b []byte, size int) {
		var h NetHdr
		var err error
		fuzzalloc.Check(t, len(b), func() { h, err = ParseNetHdr(b, size) })
		if err != nil {
			return
		}
		if size != 10 && size != 12 || len(b) < size {
			t.Fatalf("took %d bytes as a %d-byte header", len(b), size)
		}
		enc := h.Append(nil, size)
		if !bytes.Equal(enc, b[:size]) {
			t.Fatalf("%x -> %+v -> %x", b[:size], h, enc)
		}
		if h2, err := ParseNetHdr(enc, size); err != nil || h2 != h {
			t.Fatalf("round trip %+v -> %+v, %v", h, h2, err)
		}
	})
}
