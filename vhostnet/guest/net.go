package guest

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/netctl/netctl/internal/linux"
)

// NetHdr is struct virtio_net_hdr_v1 (include/uapi/linux/virtio_net.h):
// 10 bytes, or 12 with NumBuffers (VERSION_1 or MRG_RXBUF).
type NetHdr struct {
	Flags      uint8 // VIRTIO_NET_HDR_F_NEEDS_CSUM, _DATA_VALID
	GSOType    uint8 // VIRTIO_NET_HDR_GSO_*, | GSO_ECN
	HdrLen     uint16
	GSOSize    uint16
	CsumStart  uint16
	CsumOffset uint16
	NumBuffers uint16 // with MRG_RXBUF: how many buffers the packet spans
}

// Append encodes h (little-endian) in size bytes (10 or 12) onto b.
func (h NetHdr) Append(b []byte, size int) []byte {
	var x [12]byte
	x[0], x[1] = h.Flags, h.GSOType
	binary.LittleEndian.PutUint16(x[2:], h.HdrLen)
	binary.LittleEndian.PutUint16(x[4:], h.GSOSize)
	binary.LittleEndian.PutUint16(x[6:], h.CsumStart)
	binary.LittleEndian.PutUint16(x[8:], h.CsumOffset)
	binary.LittleEndian.PutUint16(x[10:], h.NumBuffers)
	return append(b, x[:size]...)
}

// ParseNetHdr decodes a size-byte header from the start of b.
func ParseNetHdr(b []byte, size int) (NetHdr, error) {
	if size != linux.VIRTIO_NET_HDR_LEN && size != linux.VIRTIO_NET_HDR_MRG_RXBUF_LEN {
		return NetHdr{}, fmt.Errorf("virtio-net header size %d: want 10 or 12", size)
	}
	if len(b) < size {
		return NetHdr{}, fmt.Errorf("%d bytes, shorter than a %d-byte virtio-net header", len(b), size)
	}
	h := NetHdr{Flags: b[0], GSOType: b[1], HdrLen: binary.LittleEndian.Uint16(b[2:]),
		GSOSize: binary.LittleEndian.Uint16(b[4:]), CsumStart: binary.LittleEndian.Uint16(b[6:]),
		CsumOffset: binary.LittleEndian.Uint16(b[8:])}
	if size == 12 {
		h.NumBuffers = binary.LittleEndian.Uint16(b[10:])
	}
	return h, nil
}

// RecvMergeableLen is RecvMergeable without copying the frame: it returns
// the header and the frame's length.
func (q *Queue) RecvMergeableLen(timeout time.Duration) (NetHdr, int, error) {
	el, err := q.usedPrefix(timeout, 12)
	if err != nil {
		return NetHdr{}, 0, err
	}
	h, err := ParseNetHdr(el.Data, 12)
	if err != nil {
		return NetHdr{}, 0, err
	}
	if h.NumBuffers == 0 {
		return h, 0, fmt.Errorf("mergeable RX buffer with num_buffers 0")
	}
	n := int(el.Len) - 12
	for i := 1; i < int(h.NumBuffers); i++ {
		el, err := q.usedPrefix(timeout, 0)
		if err != nil {
			return h, n, fmt.Errorf("buffer %d of %d: %w", i+1, h.NumBuffers, err)
		}
		n += int(el.Len)
	}
	return h, n, nil
}

// RecvMergeable takes one packet from a receive queue with MRG_RXBUF: the
// first used buffer's 12-byte header says how many buffers (NumBuffers)
// the packet spans; it collects them and returns the header and the frame.
func (q *Queue) RecvMergeable(timeout time.Duration) (NetHdr, []byte, error) {
	el, err := q.Used(timeout)
	if err != nil {
		return NetHdr{}, nil, err
	}
	h, err := ParseNetHdr(el.Data, 12)
	if err != nil {
		return NetHdr{}, nil, err
	}
	if h.NumBuffers == 0 {
		return h, nil, fmt.Errorf("mergeable RX buffer with num_buffers 0")
	}
	frame := append([]byte(nil), el.Data[12:]...)
	for i := 1; i < int(h.NumBuffers); i++ {
		el, err := q.Used(timeout)
		if err != nil {
			return h, frame, fmt.Errorf("buffer %d of %d: %w", i+1, h.NumBuffers, err)
		}
		frame = append(frame, el.Data...)
	}
	return h, frame, nil
}
