package linux

// tun/tap ioctls (include/uapi/linux/if_tun.h). Type 'T' = 0x54. Some take a
// pointer, some a plain value: see kernel-facts.md §4.1.
const (
	TUNSETNOCSUM       Request = 0x400454c8
	TUNSETDEBUG        Request = 0x400454c9
	TUNSETIFF          Request = 0x400454ca // *ifreq (40 bytes, although encoded 4)
	TUNSETPERSIST      Request = 0x400454cb // value
	TUNSETOWNER        Request = 0x400454cc // value
	TUNSETLINK         Request = 0x400454cd // value
	TUNSETGROUP        Request = 0x400454ce // value
	TUNGETFEATURES     Request = 0x800454cf
	TUNSETOFFLOAD      Request = 0x400454d0 // value
	TUNSETTXFILTER     Request = 0x400454d1
	TUNGETIFF          Request = 0x800454d2 // *ifreq
	TUNGETSNDBUF       Request = 0x800454d3
	TUNSETSNDBUF       Request = 0x400454d4
	TUNATTACHFILTER    Request = 0x401054d5
	TUNDETACHFILTER    Request = 0x401054d6
	TUNGETVNETHDRSZ    Request = 0x800454d7
	TUNSETVNETHDRSZ    Request = 0x400454d8
	TUNSETQUEUE        Request = 0x400454d9 // *ifreq
	TUNSETIFINDEX      Request = 0x400454da
	TUNGETFILTER       Request = 0x801054db
	TUNSETVNETLE       Request = 0x400454dc
	TUNGETVNETLE       Request = 0x800454dd
	TUNSETVNETBE       Request = 0x400454de
	TUNGETVNETBE       Request = 0x800454df
	TUNSETSTEERINGEBPF Request = 0x800454e0 // encoded _IOR, the kernel reads *arg
	TUNSETFILTEREBPF   Request = 0x800454e1 // encoded _IOR, the kernel reads *arg
	TUNSETCARRIER      Request = 0x400454e2
	TUNGETDEVNETNS     Request = 0x000054e3 // returns a netns fd
)

// TUNSETIFF / TUNGETIFF / TUNSETQUEUE flags (if_tun.h).
const (
	IFF_TUN          = 0x0001
	IFF_TAP          = 0x0002
	IFF_NAPI         = 0x0010
	IFF_NAPI_FRAGS   = 0x0020
	IFF_NO_CARRIER   = 0x0040
	IFF_MULTI_QUEUE  = 0x0100
	IFF_ATTACH_QUEUE = 0x0200
	IFF_DETACH_QUEUE = 0x0400
	IFF_PERSIST      = 0x0800
	IFF_NO_PI        = 0x1000
	IFF_NOFILTER     = 0x1000 // same value as IFF_NO_PI
	IFF_ONE_QUEUE    = 0x2000
	IFF_VNET_HDR     = 0x4000
	IFF_TUN_EXCL     = 0x8000

	// TUN_FEATURES_6_12 is what TUNGETFEATURES returns on tun (6.1 and 6.12).
	TUN_FEATURES_6_12 = 0x7173
	// TAP_FEATURES is what TUNGETFEATURES returns on a macvtap queue.
	TAP_FEATURES = 0x5102

	MAX_TAP_QUEUES = 256
)

// TUNSETOFFLOAD flags (if_tun.h). Every flag but CSUM needs CSUM; USO4 and
// USO6 must be set together and came in Linux 6.2.
const (
	TUN_F_CSUM    = 0x01
	TUN_F_TSO4    = 0x02
	TUN_F_TSO6    = 0x04
	TUN_F_TSO_ECN = 0x08
	TUN_F_UFO     = 0x10
	TUN_F_USO4    = 0x20
	TUN_F_USO6    = 0x40
)

// Ifreq mirrors struct ifreq as tun uses it: a name and the flags at the
// start of the 24-byte union.
type Ifreq struct {
	Name  [16]byte
	Flags uint16
	_     [22]byte
}

// TunPI mirrors struct tun_pi, the 4-byte prefix when IFF_NO_PI is clear.
type TunPI struct {
	Flags uint16
	Proto uint16 // big-endian ethertype
}

// TunFilter mirrors the header of struct tun_filter.
type TunFilter struct {
	Flags uint16
	Count uint16
}

// SockFprog mirrors struct sock_fprog.
type SockFprog struct {
	Len    uint16
	_      [6]byte
	Filter uint64 // struct sock_filter *
}
