package vhostuser

import (
	"encoding/binary"
	"fmt"
)

// Body is a decoded payload: U64, VringState, VringAddr, MemoryTable,
// SingleMemRegion, Log, RingFile, ConfigSpace or Empty.
type Body interface {
	Encode() []byte
}

// Empty is the body of a request without payload (GET_FEATURES,
// SET_OWNER, ...).
type Empty struct{}

func (Empty) Encode() []byte { return nil }

// payloadKind says how a request's payload is laid out.
type payloadKind int

const (
	kindEmpty payloadKind = iota
	kindU64
	kindVringState
	kindVringAddr
	kindMemTable
	kindSingleRegion
	kindLog
	kindRingFile
	kindConfig
)

// frontendRequests lists the requests a front-end may send that Decode
// understands, with their payload layout.
var frontendRequests = map[Request]payloadKind{
	GetFeatures: kindEmpty, SetFeatures: kindU64, SetOwner: kindEmpty, ResetOwner: kindEmpty,
	SetMemTable: kindMemTable, SetLogBase: kindLog, SetLogFD: kindEmpty,
	SetVringNum: kindVringState, SetVringAddr: kindVringAddr, SetVringBase: kindVringState, GetVringBase: kindVringState,
	SetVringKick: kindRingFile, SetVringCall: kindRingFile, SetVringErr: kindRingFile,
	GetProtocolFeatures: kindEmpty, SetProtocolFeatures: kindU64, GetQueueNum: kindEmpty,
	SetVringEnable: kindVringState, SendRARP: kindU64, NetSetMTU: kindU64,
	GetConfig: kindConfig, SetConfig: kindConfig, ResetDevice: kindEmpty, VringKick: kindVringState,
	GetMaxMemSlots: kindEmpty, AddMemReg: kindSingleRegion, RemMemReg: kindSingleRegion,
	SetStatus: kindU64, GetStatus: kindEmpty,
}

// DecodeError is what Decode returns for a message that is malformed: the
// connection cannot be trusted to be in step any more, so the bridge
// closes it.
type DecodeError struct {
	Request Request
	Reason  string
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("vhost-user: %v: %s", e.Request, e.Reason)
}

// Is makes a DecodeError match ErrInvalid.
func (e *DecodeError) Is(target error) bool { return target == ErrInvalid }

func bad(r Request, format string, args ...any) error {
	return &DecodeError{Request: r, Reason: fmt.Sprintf(format, args...)}
}

// Decode checks a front-end's message against the spec and returns its
// typed body: the version is 1, REPLY is clear, the request is one a
// front-end sends, the payload has exactly its request's size, and the
// message carries exactly the fds its request carries (SET_MEM_TABLE one
// per region, 1 to MaxFDs; SET_LOG_BASE, SET_LOG_FD and ADD_MEM_REG one;
// SET_VRING_KICK/CALL/ERR one unless bit 8 says none; REM_MEM_REG none or
// one, as QEMU sends it with and rust-vmm without). It is a pure function
// of the bytes and the fd count; it neither reads nor closes the fds. Its
// errors are *DecodeError and wrap ErrInvalid.
func Decode(m *Message) (Body, error) {
	r := m.Request
	if m.Flags&VersionMask != Version {
		return nil, bad(r, "protocol version %d: only version 1 exists", m.Flags&VersionMask)
	}
	if m.Flags&FlagReply != 0 {
		return nil, bad(r, "a front-end's request has the REPLY flag set")
	}
	if int(m.Size) != len(m.Payload) {
		return nil, bad(r, "header says %d payload bytes, %d came", m.Size, len(m.Payload))
	}
	kind, ok := frontendRequests[r]
	if !ok {
		return nil, bad(r, "not a request a front-end sends to a net back-end")
	}
	p, nfds := m.Payload, len(m.FDs)
	size := func(n int) error {
		if len(p) != n {
			return bad(r, "payload of %d bytes, the request carries exactly %d", len(p), n)
		}
		return nil
	}
	fds := func(n int) error {
		if nfds != n {
			return bad(r, "%d fds came with the message, the request carries %d", nfds, n)
		}
		return nil
	}
	switch kind {
	case kindEmpty:
		if err := size(0); err != nil {
			return nil, err
		}
		want := 0
		if r == SetLogFD {
			want = 1
		}
		if err := fds(want); err != nil {
			return nil, err
		}
		return Empty{}, nil
	case kindU64:
		if err := size(U64Size); err != nil {
			return nil, err
		}
		if err := fds(0); err != nil {
			return nil, err
		}
		return U64(binary.LittleEndian.Uint64(p)), nil
	case kindVringState:
		if err := size(VringStateSize); err != nil {
			return nil, err
		}
		if err := fds(0); err != nil {
			return nil, err
		}
		return decodeVringState(p), nil
	case kindVringAddr:
		if err := size(VringAddrSize); err != nil {
			return nil, err
		}
		if err := fds(0); err != nil {
			return nil, err
		}
		return decodeVringAddr(p), nil
	case kindRingFile:
		if err := size(U64Size); err != nil {
			return nil, err
		}
		v := binary.LittleEndian.Uint64(p)
		if v&^uint64(VringIndexMask|VringNoFDFlag) != 0 {
			return nil, bad(r, "payload %#x has bits set beyond the ring index (0-7) and the no-fd flag (8)", v)
		}
		f := RingFile{Index: uint32(v & VringIndexMask), NoFD: v&VringNoFDFlag != 0}
		want := 1
		if f.NoFD {
			want = 0
		}
		if err := fds(want); err != nil {
			return nil, err
		}
		return f, nil
	case kindMemTable:
		if len(p) < 8 {
			return nil, bad(r, "payload of %d bytes is shorter than the 8-byte region count and padding", len(p))
		}
		n := binary.LittleEndian.Uint32(p)
		if n == 0 || n > MaxFDs {
			return nil, bad(r, "%d regions: a memory table has 1 to %d (VHOST_MEMORY_BASELINE_NREGIONS); "+
				"use ADD_MEM_REG for more", n, MaxFDs)
		}
		if err := size(8 + MemRegionSize*int(n)); err != nil {
			return nil, err
		}
		if err := fds(int(n)); err != nil {
			return nil, err
		}
		t := MemoryTable{Regions: make([]MemRegion, n)}
		for i := range t.Regions {
			t.Regions[i] = decodeMemRegion(p[8+MemRegionSize*i:])
		}
		return t, nil
	case kindSingleRegion:
		if err := size(SingleMemRegionSize); err != nil {
			return nil, err
		}
		if r == RemMemReg {
			if nfds > 1 {
				return nil, bad(r, "%d fds came with the message, the request carries 0 or 1", nfds)
			}
		} else if err := fds(1); err != nil {
			return nil, err
		}
		return SingleMemRegion{Region: decodeMemRegion(p[8:])}, nil
	case kindLog:
		if err := size(LogSize); err != nil {
			return nil, err
		}
		if err := fds(1); err != nil {
			return nil, err
		}
		return decodeFixed[Log](p), nil
	case kindConfig:
		if len(p) < ConfigHeaderSize {
			return nil, bad(r, "payload of %d bytes is shorter than the 12-byte config header", len(p))
		}
		if err := fds(0); err != nil {
			return nil, err
		}
		le := binary.LittleEndian
		c := ConfigSpace{Offset: le.Uint32(p[0:]), Size: le.Uint32(p[4:]), Flags: le.Uint32(p[8:])}
		if int(c.Size) != len(p)-ConfigHeaderSize {
			return nil, bad(r, "config size %d, but %d bytes follow the header", c.Size, len(p)-ConfigHeaderSize)
		}
		c.Data = append([]byte(nil), p[ConfigHeaderSize:]...)
		return c, nil
	}
	return nil, bad(r, "no decoder")
}
