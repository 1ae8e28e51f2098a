package linux

// virtio-net feature bits (include/uapi/linux/virtio_net.h), as bit numbers.
const (
	VIRTIO_NET_F_CSUM                = 0
	VIRTIO_NET_F_GUEST_CSUM          = 1
	VIRTIO_NET_F_CTRL_GUEST_OFFLOADS = 2
	VIRTIO_NET_F_MTU                 = 3
	VIRTIO_NET_F_MAC                 = 5
	VIRTIO_NET_F_GSO                 = 6
	VIRTIO_NET_F_GUEST_TSO4          = 7
	VIRTIO_NET_F_GUEST_TSO6          = 8
	VIRTIO_NET_F_GUEST_ECN           = 9
	VIRTIO_NET_F_GUEST_UFO           = 10
	VIRTIO_NET_F_HOST_TSO4           = 11
	VIRTIO_NET_F_HOST_TSO6           = 12
	VIRTIO_NET_F_HOST_ECN            = 13
	VIRTIO_NET_F_HOST_UFO            = 14
	VIRTIO_NET_F_MRG_RXBUF           = 15
	VIRTIO_NET_F_STATUS              = 16
	VIRTIO_NET_F_CTRL_VQ             = 17
	VIRTIO_NET_F_CTRL_RX             = 18
	VIRTIO_NET_F_CTRL_VLAN           = 19
	VIRTIO_NET_F_CTRL_RX_EXTRA       = 20
	VIRTIO_NET_F_GUEST_ANNOUNCE      = 21
	VIRTIO_NET_F_MQ                  = 22
	VIRTIO_NET_F_CTRL_MAC_ADDR       = 23
	VIRTIO_NET_F_DEVICE_STATS        = 50
	VIRTIO_NET_F_VQ_NOTF_COAL        = 52
	VIRTIO_NET_F_NOTF_COAL           = 53
	VIRTIO_NET_F_GUEST_USO4          = 54 // Linux 6.2
	VIRTIO_NET_F_GUEST_USO6          = 55 // Linux 6.2
	VIRTIO_NET_F_HOST_USO            = 56 // Linux 6.2
	VIRTIO_NET_F_HASH_REPORT         = 57
	VIRTIO_NET_F_GUEST_HDRLEN        = 59
	VIRTIO_NET_F_RSS                 = 60
	VIRTIO_NET_F_RSC_EXT             = 61
	VIRTIO_NET_F_STANDBY             = 62
	VIRTIO_NET_F_SPEED_DUPLEX        = 63
)

// Transport and ring feature bits (virtio_config.h, virtio_ring.h).
const (
	VIRTIO_F_NOTIFY_ON_EMPTY     = 24
	VIRTIO_F_ANY_LAYOUT          = 27
	VIRTIO_RING_F_INDIRECT_DESC  = 28
	VIRTIO_RING_F_EVENT_IDX      = 29
	VIRTIO_F_VERSION_1           = 32
	VIRTIO_F_ACCESS_PLATFORM     = 33
	VIRTIO_F_RING_PACKED         = 34
	VIRTIO_F_IN_ORDER            = 35
	VIRTIO_F_ORDER_PLATFORM      = 36
	VIRTIO_F_SR_IOV              = 37
	VIRTIO_F_NOTIFICATION_DATA   = 38
	VIRTIO_F_NOTIF_CONFIG_DATA   = 39
	VIRTIO_F_RING_RESET          = 40
	VIRTIO_F_ADMIN_VQ            = 41
	VIRTIO_TRANSPORT_F_START     = 28
	VIRTIO_TRANSPORT_F_END       = 42
	VIRTIO_NET_S_LINK_UP         = 1
	VIRTIO_NET_S_ANNOUNCE        = 2
	VIRTIO_ID_NET                = 1
	VIRTIO_ID_BLOCK              = 2
	VIRTIO_CONFIG_S_ACKNOWLEDGE  = 0x01
	VIRTIO_CONFIG_S_DRIVER       = 0x02
	VIRTIO_CONFIG_S_DRIVER_OK    = 0x04
	VIRTIO_CONFIG_S_FEATURES_OK  = 0x08
	VIRTIO_CONFIG_S_NEEDS_RESET  = 0x40
	VIRTIO_CONFIG_S_FAILED       = 0x80
	VRING_DESC_F_NEXT            = 1
	VRING_DESC_F_WRITE           = 2
	VRING_DESC_F_INDIRECT        = 4
	VRING_USED_F_NO_NOTIFY       = 1
	VRING_AVAIL_F_NO_INTERRUPT   = 1
	VRING_AVAIL_ALIGN_SIZE       = 2
	VRING_USED_ALIGN_SIZE        = 4
	VRING_DESC_ALIGN_SIZE        = 16
	VIRTIO_NET_HDR_F_NEEDS_CSUM  = 1
	VIRTIO_NET_HDR_F_DATA_VALID  = 2
	VIRTIO_NET_HDR_F_RSC_INFO    = 4
	VIRTIO_NET_HDR_GSO_NONE      = 0
	VIRTIO_NET_HDR_GSO_TCPV4     = 1
	VIRTIO_NET_HDR_GSO_UDP       = 3
	VIRTIO_NET_HDR_GSO_TCPV6     = 4
	VIRTIO_NET_HDR_GSO_UDP_L4    = 5
	VIRTIO_NET_HDR_GSO_ECN       = 0x80
	VIRTIO_NET_HDR_LEN           = 10 // sizeof(struct virtio_net_hdr)
	VIRTIO_NET_HDR_MRG_RXBUF_LEN = 12 // with VERSION_1 or MRG_RXBUF
	VIRTIO_NET_HDR_V1_HASH_LEN   = 20
)

// VirtioNetHdr mirrors struct virtio_net_hdr (10 bytes). Fields are
// little-endian for VERSION_1 (and native, so also little, on x86).
type VirtioNetHdr struct {
	Flags      uint8
	GSOType    uint8
	HdrLen     uint16
	GSOSize    uint16
	CsumStart  uint16
	CsumOffset uint16
}

// VirtioNetHdrV1 mirrors struct virtio_net_hdr_v1, which is bit for bit
// struct virtio_net_hdr_mrg_rxbuf (12 bytes).
type VirtioNetHdrV1 struct {
	VirtioNetHdr
	NumBuffers uint16
}

// VirtioNetHdrV1Hash mirrors struct virtio_net_hdr_v1_hash (20 bytes).
type VirtioNetHdrV1Hash struct {
	Hdr        VirtioNetHdrV1
	HashValue  uint32
	HashReport uint16
	Padding    uint16
}

// VirtioNetConfig mirrors struct virtio_net_config (packed, 24 bytes). Every
// multi-byte field is little-endian and byte-aligned in the kernel struct,
// so they are held as byte arrays here.
type VirtioNetConfig struct {
	MAC                     [6]byte
	Status                  [2]byte
	MaxVirtqueuePairs       [2]byte
	MTU                     [2]byte
	Speed                   [4]byte
	Duplex                  uint8
	RSSMaxKeySize           uint8
	RSSMaxIndirectionTabLen [2]byte
	SupportedHashTypes      [4]byte
}

// VringDesc mirrors struct vring_desc (16 bytes).
type VringDesc struct {
	Addr  uint64
	Len   uint32
	Flags uint16
	Next  uint16
}

// VringUsedElem mirrors struct vring_used_elem (8 bytes).
type VringUsedElem struct {
	ID  uint32
	Len uint32
}
