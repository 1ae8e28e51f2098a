package vhostuser

import (
	"encoding/binary"
	"fmt"
)

// The payloads of the requests the bridge handles, as the spec lays them
// out ("Message types" in vhost-user.rst). Each has an Encode that
// produces the exact bytes and a decode that accepts only its exact size
// (Decode checks the size). The fixed-size ones (VringState, VringAddr,
// MemRegion, Log) are their fields in wire order, each little-endian, and
// nothing else: encodeFixed and decodeFixed lay them out from the struct,
// so that a field's offset is written once, in the struct's order.

// encodeFixed gives v's wire bytes (v: one of the fixed-size payloads).
func encodeFixed(v any) []byte {
	b, err := binary.Append(nil, binary.LittleEndian, v)
	if err != nil {
		panic(fmt.Sprintf("vhostuser: %T is not a fixed-size payload: %v", v, err))
	}
	return b
}

// decodeFixed reads a T from the start of p, which Decode has checked
// holds at least binary.Size(T) bytes.
func decodeFixed[T any](p []byte) T {
	var v T
	if _, err := binary.Decode(p, binary.LittleEndian, &v); err != nil {
		panic(fmt.Sprintf("vhostuser: %d bytes for a %T: %v", len(p), v, err))
	}
	return v
}

// VringState is "A vring state description": a ring index and a number
// (SET_VRING_NUM, SET_VRING_BASE, GET_VRING_BASE, SET_VRING_ENABLE).
type VringState struct {
	Index uint32
	Num   uint32
}

// VringStateSize is the encoded size of a VringState.
const VringStateSize = 8

func (s VringState) Encode() []byte { return encodeFixed(s) }

func decodeVringState(p []byte) VringState { return decodeFixed[VringState](p) }

// VringAddrFlagLog is bit 0 of VringAddr.Flags (VHOST_VRING_F_LOG): log
// writes to the used ring at Log.
const VringAddrFlagLog = 1 << 0

// VringAddr is "A vring address description" (SET_VRING_ADDR). Desc, Used
// and Avail are the front-end's user (virtual) addresses; Log is
// guest-physical. The wire order is desc, used, avail, log.
type VringAddr struct {
	Index uint32
	Flags uint32
	Desc  uint64
	Used  uint64
	Avail uint64
	Log   uint64
}

// VringAddrSize is the encoded size of a VringAddr.
const VringAddrSize = 40

func (a VringAddr) Encode() []byte { return encodeFixed(a) }

func decodeVringAddr(p []byte) VringAddr { return decodeFixed[VringAddr](p) }

// MemRegion is "A memory region description": guest-physical address,
// size, the front-end's user address of the region, and the offset of the
// region in the file whose fd comes with the message.
type MemRegion struct {
	GuestPhysAddr uint64
	Size          uint64
	UserAddr      uint64
	MmapOffset    uint64
}

// MemRegionSize is the encoded size of a MemRegion.
const MemRegionSize = 32

func (r MemRegion) put(b []byte) { copy(b, encodeFixed(r)) }

func decodeMemRegion(p []byte) MemRegion { return decodeFixed[MemRegion](p) }

func (r MemRegion) String() string {
	return fmt.Sprintf("gpa %#x size %#x uaddr %#x offset %#x", r.GuestPhysAddr, r.Size, r.UserAddr, r.MmapOffset)
}

// MemoryTable is "Multiple Memory regions description" (SET_MEM_TABLE): a
// u32 count, u32 padding, then the regions, one fd each in order.
type MemoryTable struct {
	Regions []MemRegion
}

// Encode lays the table out as QEMU does: the header and exactly
// len(Regions) regions.
func (t MemoryTable) Encode() []byte {
	b := make([]byte, 8+MemRegionSize*len(t.Regions))
	binary.LittleEndian.PutUint32(b[0:], uint32(len(t.Regions)))
	for i, r := range t.Regions {
		r.put(b[8+MemRegionSize*i:])
	}
	return b
}

// SingleMemRegion is "Single memory region description" (ADD_MEM_REG,
// REM_MEM_REG): u64 padding, then one region.
type SingleMemRegion struct {
	Region MemRegion
}

// SingleMemRegionSize is the encoded size of a SingleMemRegion.
const SingleMemRegionSize = 8 + MemRegionSize

func (s SingleMemRegion) Encode() []byte {
	b := make([]byte, SingleMemRegionSize)
	s.Region.put(b[8:])
	return b
}

// Log is "Log description" (SET_LOG_BASE with LOG_SHMFD): the size of the
// dirty log and its offset in the fd that comes with the message.
type Log struct {
	MmapSize   uint64
	MmapOffset uint64
}

// LogSize is the encoded size of a Log.
const LogSize = 16

func (l Log) Encode() []byte { return encodeFixed(l) }

// U64 is the payload of the requests that carry one 64-bit number
// (features, queue counts, ring file indexes, replies).
type U64 uint64

// U64Size is the encoded size of a U64.
const U64Size = 8

func (u U64) Encode() []byte {
	b := make([]byte, U64Size)
	binary.LittleEndian.PutUint64(b, uint64(u))
	return b
}

// Ring-file payload (SET_VRING_KICK, CALL, ERR): bits 0-7 the ring index,
// bit 8 set when no fd comes with the message.
const (
	VringIndexMask = 0xff
	VringNoFDFlag  = 1 << 8
)

// RingFile is a decoded SET_VRING_KICK/CALL/ERR payload.
type RingFile struct {
	Index uint32
	NoFD  bool // polling mode (or, for CALL/ERR, no notification)
}

// Encode gives the u64 payload.
func (f RingFile) Encode() []byte {
	v := uint64(f.Index) & VringIndexMask
	if f.NoFD {
		v |= VringNoFDFlag
	}
	return U64(v).Encode()
}

// ConfigSpace is "Device configuration space" (GET_CONFIG, SET_CONFIG). The
// bridge does not offer ProtocolConfig (QEMU keeps virtio-net's config
// space), so it only decodes this to refuse it with a clear error.
type ConfigSpace struct {
	Offset, Size, Flags uint32
	Data                []byte
}

// ConfigHeaderSize is the size of Config's fixed part.
const ConfigHeaderSize = 12

func (c ConfigSpace) Encode() []byte {
	b := make([]byte, ConfigHeaderSize+len(c.Data))
	binary.LittleEndian.PutUint32(b[0:], c.Offset)
	binary.LittleEndian.PutUint32(b[4:], c.Size)
	binary.LittleEndian.PutUint32(b[8:], c.Flags)
	copy(b[12:], c.Data)
	return b
}
