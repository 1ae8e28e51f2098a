package vhostuser

import (
	"fmt"
	"strings"
)

// Request is a vhost-user request code (docs/interop/vhost-user.rst,
// "Front-end message types"). The same number space is used for the
// replies, which carry the request they answer.
type Request uint32

// The front-end requests. The bridge implements the ones its doc names;
// the rest are named so that logs and errors can say what was refused.
const (
	GetFeatures         Request = 1
	SetFeatures         Request = 2
	SetOwner            Request = 3
	ResetOwner          Request = 4
	SetMemTable         Request = 5
	SetLogBase          Request = 6
	SetLogFD            Request = 7
	SetVringNum         Request = 8
	SetVringAddr        Request = 9
	SetVringBase        Request = 10
	GetVringBase        Request = 11
	SetVringKick        Request = 12
	SetVringCall        Request = 13
	SetVringErr         Request = 14
	GetProtocolFeatures Request = 15
	SetProtocolFeatures Request = 16
	GetQueueNum         Request = 17
	SetVringEnable      Request = 18
	SendRARP            Request = 19
	NetSetMTU           Request = 20
	SetBackendReqFD     Request = 21
	IOTLBMsg            Request = 22
	SetVringEndian      Request = 23
	GetConfig           Request = 24
	SetConfig           Request = 25
	CreateCryptoSession Request = 26
	CloseCryptoSession  Request = 27
	PostcopyAdvise      Request = 28
	PostcopyListen      Request = 29
	PostcopyEnd         Request = 30
	GetInflightFD       Request = 31
	SetInflightFD       Request = 32
	GPUSetSocket        Request = 33
	ResetDevice         Request = 34
	VringKick           Request = 35
	GetMaxMemSlots      Request = 36
	AddMemReg           Request = 37
	RemMemReg           Request = 38
	SetStatus           Request = 39
	GetStatus           Request = 40
	GetSharedObject     Request = 41
	SetDeviceStateFD    Request = 42
	CheckDeviceState    Request = 43
)

var requestNames = map[Request]string{
	GetFeatures: "GET_FEATURES", SetFeatures: "SET_FEATURES", SetOwner: "SET_OWNER", ResetOwner: "RESET_OWNER",
	SetMemTable: "SET_MEM_TABLE", SetLogBase: "SET_LOG_BASE", SetLogFD: "SET_LOG_FD", SetVringNum: "SET_VRING_NUM",
	SetVringAddr: "SET_VRING_ADDR", SetVringBase: "SET_VRING_BASE", GetVringBase: "GET_VRING_BASE",
	SetVringKick: "SET_VRING_KICK", SetVringCall: "SET_VRING_CALL", SetVringErr: "SET_VRING_ERR",
	GetProtocolFeatures: "GET_PROTOCOL_FEATURES", SetProtocolFeatures: "SET_PROTOCOL_FEATURES",
	GetQueueNum: "GET_QUEUE_NUM", SetVringEnable: "SET_VRING_ENABLE", SendRARP: "SEND_RARP", NetSetMTU: "NET_SET_MTU",
	SetBackendReqFD: "SET_BACKEND_REQ_FD", IOTLBMsg: "IOTLB_MSG", SetVringEndian: "SET_VRING_ENDIAN",
	GetConfig: "GET_CONFIG", SetConfig: "SET_CONFIG", CreateCryptoSession: "CREATE_CRYPTO_SESSION",
	CloseCryptoSession: "CLOSE_CRYPTO_SESSION", PostcopyAdvise: "POSTCOPY_ADVISE", PostcopyListen: "POSTCOPY_LISTEN",
	PostcopyEnd: "POSTCOPY_END", GetInflightFD: "GET_INFLIGHT_FD", SetInflightFD: "SET_INFLIGHT_FD",
	GPUSetSocket: "GPU_SET_SOCKET", ResetDevice: "RESET_DEVICE", VringKick: "VRING_KICK",
	GetMaxMemSlots: "GET_MAX_MEM_SLOTS", AddMemReg: "ADD_MEM_REG", RemMemReg: "REM_MEM_REG",
	SetStatus: "SET_STATUS", GetStatus: "GET_STATUS", GetSharedObject: "GET_SHARED_OBJECT",
	SetDeviceStateFD: "SET_DEVICE_STATE_FD", CheckDeviceState: "CHECK_DEVICE_STATE",
}

// String is the request's name without the VHOST_USER_ prefix
// ("SET_MEM_TABLE"), or "request N" for a code the spec does not define.
func (r Request) String() string {
	if n, ok := requestNames[r]; ok {
		return n
	}
	return fmt.Sprintf("request %d", uint32(r))
}

// Flags is a message header's flags word: bits 0-1 the protocol version
// (always 1), bit 2 REPLY, bit 3 NEED_REPLY.
type Flags uint32

const (
	// Version is the only protocol version (bits 0-1 of the flags).
	Version     Flags = 0x1
	VersionMask Flags = 0x3
	// FlagReply marks a back-end's reply.
	FlagReply Flags = 1 << 2
	// FlagNeedReply asks for a REPLY_ACK reply (only meaningful once
	// ProtocolReplyAck is negotiated).
	FlagNeedReply Flags = 1 << 3
	knownFlags          = VersionMask | FlagReply | FlagNeedReply
)

// String prints the flags as "v1|REPLY|NEED_REPLY|0x10".
func (f Flags) String() string {
	parts := []string{fmt.Sprintf("v%d", f&VersionMask)}
	if f&FlagReply != 0 {
		parts = append(parts, "REPLY")
	}
	if f&FlagNeedReply != 0 {
		parts = append(parts, "NEED_REPLY")
	}
	if rest := f &^ knownFlags; rest != 0 {
		parts = append(parts, fmt.Sprintf("%#x", uint32(rest)))
	}
	return strings.Join(parts, "|")
}

// Header is the 12-byte header every message starts with (native
// endianness, which is little-endian on every architecture netctl builds
// for).
type Header struct {
	Request Request
	Flags   Flags
	Size    uint32 // payload bytes that follow
}

// HeaderSize is the encoded size of a Header.
const HeaderSize = 12

// MaxPayload is the largest payload ReadMessage accepts: 268 bytes, the
// largest payload of any request a net front-end sends, GET_CONFIG and
// SET_CONFIG's VhostUserConfig (12 bytes + VHOST_USER_MAX_CONFIG_SIZE
// 256; the bridge offers neither). The largest the bridge handles is
// SET_MEM_TABLE's, 264 (8 + 8 regions of 32). The spec sets no maximum,
// and this is not QEMU's: QEMU's VHOST_USER_PAYLOAD_SIZE is
// sizeof(VhostUserPayload) (hw/virtio/vhost-user.c), whose largest member
// is the crypto device's VhostUserCryptoSession: 632 bytes in Debian 12's
// QEMU 7.2 (its refusal of a larger reply says "exceeds the maximum 632";
// TestHostQEMUPayloadLimit measures it), more in QEMUs whose crypto
// sessions carry asymmetric keys. libvhost-user's payload union holds no
// crypto session; its largest member is VhostUserConfig. A payload over
// MaxPayload can only belong to a request the bridge does not implement
// and whose feature it never offered: ReadMessage refuses it, and the
// connection is closed (the stream would be out of step).
const MaxPayload = 268

// MaxFDs is the most file descriptors one message may carry:
// VHOST_MEMORY_BASELINE_NREGIONS, the region count of SET_MEM_TABLE.
const MaxFDs = 8

// Virtio feature bit 30, VHOST_USER_F_PROTOCOL_FEATURES: the back-end
// speaks GET/SET_PROTOCOL_FEATURES; once acknowledged in SET_FEATURES,
// rings start disabled.
const FeatureProtocolFeatures uint64 = 1 << 30

// ProtocolFeatures is a set of VHOST_USER_PROTOCOL_F_* bits.
type ProtocolFeatures uint64

// Protocol feature bits (vhost-user.rst, "Protocol features").
const (
	ProtocolMQ                ProtocolFeatures = 1 << 0
	ProtocolLogShmFD          ProtocolFeatures = 1 << 1
	ProtocolRARP              ProtocolFeatures = 1 << 2
	ProtocolReplyAck          ProtocolFeatures = 1 << 3
	ProtocolMTU               ProtocolFeatures = 1 << 4
	ProtocolBackendReq        ProtocolFeatures = 1 << 5
	ProtocolCrossEndian       ProtocolFeatures = 1 << 6
	ProtocolCryptoSession     ProtocolFeatures = 1 << 7
	ProtocolPagefault         ProtocolFeatures = 1 << 8
	ProtocolConfig            ProtocolFeatures = 1 << 9
	ProtocolBackendSendFD     ProtocolFeatures = 1 << 10
	ProtocolHostNotifier      ProtocolFeatures = 1 << 11
	ProtocolInflightShmFD     ProtocolFeatures = 1 << 12
	ProtocolResetDevice       ProtocolFeatures = 1 << 13
	ProtocolInbandNotify      ProtocolFeatures = 1 << 14
	ProtocolConfigureMemSlots ProtocolFeatures = 1 << 15
	ProtocolStatus            ProtocolFeatures = 1 << 16
	ProtocolXenMmap           ProtocolFeatures = 1 << 17
	ProtocolSharedObject      ProtocolFeatures = 1 << 18
	ProtocolDeviceState       ProtocolFeatures = 1 << 19
)

var protocolNames = [...]string{"MQ", "LOG_SHMFD", "RARP", "REPLY_ACK", "MTU", "BACKEND_REQ", "CROSS_ENDIAN",
	"CRYPTO_SESSION", "PAGEFAULT", "CONFIG", "BACKEND_SEND_FD", "HOST_NOTIFIER", "INFLIGHT_SHMFD", "RESET_DEVICE",
	"INBAND_NOTIFICATIONS", "CONFIGURE_MEM_SLOTS", "STATUS", "XEN_MMAP", "SHARED_OBJECT", "DEVICE_STATE"}

// String prints names first, unknown bits as "bit N": "MQ|REPLY_ACK|bit 40".
func (p ProtocolFeatures) String() string {
	if p == 0 {
		return "none"
	}
	var parts []string
	for b := uint(0); b < 64; b++ {
		if p&(1<<b) == 0 {
			continue
		}
		if b < uint(len(protocolNames)) {
			parts = append(parts, protocolNames[b])
		} else {
			parts = append(parts, fmt.Sprintf("bit %d", b))
		}
	}
	return strings.Join(parts, "|")
}

// Has reports whether every bit of x is in p.
func (p ProtocolFeatures) Has(x ProtocolFeatures) bool { return p&x == x }

// Message is one vhost-user message: its header, its payload (Header.Size
// bytes) and the file descriptors that came with it. Whoever holds a
// Message from ReadMessage owns its FDs and must close them (CloseFDs) or
// hand them on.
type Message struct {
	Header
	Payload []byte
	FDs     []int
}

// String is "SET_VRING_ADDR (v1|NEED_REPLY, 40 bytes, 0 fds)".
func (m *Message) String() string {
	return fmt.Sprintf("%v (%v, %d bytes, %d fds)", m.Request, m.Flags, len(m.Payload), len(m.FDs))
}
