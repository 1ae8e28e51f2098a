package linux

// vhost ioctls (include/uapi/linux/vhost.h, Linux 6.12). VHOST_VIRTIO = 0xAF.
// The kernel does not check direction bits: the values are used as encoded.
const (
	VHOST_VIRTIO = 0xAF

	VHOST_GET_FEATURES               Request = 0x8008af00
	VHOST_SET_FEATURES               Request = 0x4008af00
	VHOST_SET_OWNER                  Request = 0x0000af01
	VHOST_RESET_OWNER                Request = 0x0000af02
	VHOST_SET_MEM_TABLE              Request = 0x4008af03 // size covers only the 8-byte header
	VHOST_SET_LOG_BASE               Request = 0x4008af04
	VHOST_SET_LOG_FD                 Request = 0x4004af07
	VHOST_NEW_WORKER                 Request = 0x8004af08
	VHOST_FREE_WORKER                Request = 0x4004af09
	VHOST_SET_VRING_NUM              Request = 0x4008af10
	VHOST_SET_VRING_ADDR             Request = 0x4028af11
	VHOST_SET_VRING_BASE             Request = 0x4008af12
	VHOST_GET_VRING_BASE             Request = 0xc008af12
	VHOST_SET_VRING_ENDIAN           Request = 0x4008af13
	VHOST_GET_VRING_ENDIAN           Request = 0x4008af14 // encoded _IOW, but the kernel writes back
	VHOST_ATTACH_VRING_WORKER        Request = 0x4008af15
	VHOST_GET_VRING_WORKER           Request = 0xc008af16
	VHOST_SET_VRING_KICK             Request = 0x4008af20
	VHOST_SET_VRING_CALL             Request = 0x4008af21
	VHOST_SET_VRING_ERR              Request = 0x4008af22
	VHOST_SET_VRING_BUSYLOOP_TIMEOUT Request = 0x4008af23
	VHOST_GET_VRING_BUSYLOOP_TIMEOUT Request = 0x4008af24 // encoded _IOW, but the kernel writes back
	VHOST_SET_BACKEND_FEATURES       Request = 0x4008af25
	VHOST_GET_BACKEND_FEATURES       Request = 0x8008af26
	VHOST_NET_SET_BACKEND            Request = 0x4008af30
	VHOST_SET_FORK_FROM_OWNER        Request = 0x4001af84 // renumbered upstream in 2025; 6.12.117 has these numbers
	VHOST_GET_FORK_FROM_OWNER        Request = 0x8001af85

	VHOST_VDPA_GET_DEVICE_ID        Request = 0x8004af70
	VHOST_VDPA_GET_STATUS           Request = 0x8001af71
	VHOST_VDPA_SET_STATUS           Request = 0x4001af72
	VHOST_VDPA_GET_CONFIG           Request = 0x8008af73 // size covers only the 8-byte header
	VHOST_VDPA_SET_CONFIG           Request = 0x4008af74
	VHOST_VDPA_SET_VRING_ENABLE     Request = 0x4008af75
	VHOST_VDPA_GET_VRING_NUM        Request = 0x8002af76
	VHOST_VDPA_SET_CONFIG_CALL      Request = 0x4004af77
	VHOST_VDPA_GET_IOVA_RANGE       Request = 0x8010af78
	VHOST_VDPA_GET_CONFIG_SIZE      Request = 0x8004af79
	VHOST_VDPA_GET_AS_NUM           Request = 0x8004af7a
	VHOST_VDPA_GET_VRING_GROUP      Request = 0xc008af7b
	VHOST_VDPA_SET_GROUP_ASID       Request = 0x4008af7c
	VHOST_VDPA_SUSPEND              Request = 0x0000af7d
	VHOST_VDPA_RESUME               Request = 0x0000af7e
	VHOST_VDPA_GET_VRING_DESC_GROUP Request = 0xc008af7f
	VHOST_VDPA_GET_VQS_COUNT        Request = 0x8004af80
	VHOST_VDPA_GET_GROUP_NUM        Request = 0x8004af81
	VHOST_VDPA_GET_VRING_SIZE       Request = 0xc008af82
)

// vhost constants (vhost.h, vhost_types.h).
const (
	VHOST_FILE_UNBIND = -1 // fd meaning "unbind" for KICK/CALL/ERR/LOG_FD/NET_SET_BACKEND

	VHOST_VRING_F_LOG = 0 // bit number in VhostVringAddr.Flags

	VHOST_VRING_LITTLE_ENDIAN = 0
	VHOST_VRING_BIG_ENDIAN    = 1

	VHOST_ACCESS_RO = 1
	VHOST_ACCESS_WO = 2
	VHOST_ACCESS_RW = 3

	VHOST_IOTLB_MISS        = 1
	VHOST_IOTLB_UPDATE      = 2
	VHOST_IOTLB_INVALIDATE  = 3
	VHOST_IOTLB_ACCESS_FAIL = 4
	VHOST_IOTLB_BATCH_BEGIN = 5
	VHOST_IOTLB_BATCH_END   = 6

	VHOST_IOTLB_MSG    = 1
	VHOST_IOTLB_MSG_V2 = 2

	VHOST_PAGE_SIZE = 0x1000

	VHOST_FORK_OWNER_KTHREAD = 0
	VHOST_FORK_OWNER_TASK    = 1

	// Feature bits (bit numbers) in the vhost feature word.
	VHOST_F_LOG_ALL            = 26
	VHOST_NET_F_VIRTIO_NET_HDR = 27 // the same bit as VIRTIO_F_ANY_LAYOUT

	// Backend feature bits: bit numbers, although the header writes them 0x1..0x8.
	VHOST_BACKEND_F_IOTLB_MSG_V2           = 1
	VHOST_BACKEND_F_IOTLB_BATCH            = 2
	VHOST_BACKEND_F_IOTLB_ASID             = 3
	VHOST_BACKEND_F_SUSPEND                = 4
	VHOST_BACKEND_F_RESUME                 = 5
	VHOST_BACKEND_F_ENABLE_AFTER_DRIVER_OK = 6
	VHOST_BACKEND_F_DESC_ASID              = 7
	VHOST_BACKEND_F_IOTLB_PERSIST          = 8

	// VHOST_NET_FEATURES_6_12 is what /dev/vhost-net reports on Linux 6.12
	// (drivers/vhost/net.c VHOST_NET_FEATURES).
	VHOST_NET_FEATURES_6_12 = 0x1033d008000

	// vhost-net virtqueue indexes: one fd drives one queue pair.
	VHOST_NET_VQ_RX = 0
	VHOST_NET_VQ_TX = 1
)

// VhostVringState mirrors struct vhost_vring_state (vhost_types.h).
type VhostVringState struct {
	Index uint32
	Num   uint32
}

// VhostVringFile mirrors struct vhost_vring_file (vhost_types.h).
type VhostVringFile struct {
	Index uint32
	FD    int32
}

// VhostVringAddr mirrors struct vhost_vring_addr (vhost_types.h). The ring
// addresses are virtual addresses of the owner process.
type VhostVringAddr struct {
	Index         uint32
	Flags         uint32
	DescUserAddr  uint64
	UsedUserAddr  uint64
	AvailUserAddr uint64
	LogGuestAddr  uint64
}

// VhostWorkerState mirrors struct vhost_worker_state (vhost_types.h).
type VhostWorkerState struct {
	WorkerID uint32
}

// VhostVringWorker mirrors struct vhost_vring_worker (vhost_types.h).
type VhostVringWorker struct {
	Index    uint32
	WorkerID uint32
}

// VhostMemory mirrors the header of struct vhost_memory (vhost_types.h); the
// kernel reads NRegions VhostMemoryRegion entries right after it.
type VhostMemory struct {
	NRegions uint32
	Padding  uint32
}

// VhostMemoryRegion mirrors struct vhost_memory_region (vhost_types.h).
type VhostMemoryRegion struct {
	GuestPhysAddr uint64
	MemorySize    uint64
	UserspaceAddr uint64
	FlagsPadding  uint64
}

// VhostIOTLBMsg mirrors struct vhost_iotlb_msg (vhost_types.h): 26 bytes of
// fields and 6 bytes of tail padding.
type VhostIOTLBMsg struct {
	IOVA  uint64
	Size  uint64
	UAddr uint64
	Perm  uint8
	Type  uint8
	_     [6]byte
}

// VhostMsg mirrors struct vhost_msg (vhost_types.h), written to and read from
// a vhost fd. The union is 64 bytes; IOTLB is its first member.
type VhostMsg struct {
	Type  uint32
	_     uint32
	IOTLB VhostIOTLBMsg
	_     [32]byte
}

// VhostMsgV2 mirrors struct vhost_msg_v2 (vhost_types.h).
type VhostMsgV2 struct {
	Type  uint32
	ASID  uint32
	IOTLB VhostIOTLBMsg
	_     [32]byte
}

// VhostVDPAConfig mirrors the header of struct vhost_vdpa_config; Len bytes
// of config follow it.
type VhostVDPAConfig struct {
	Off uint32
	Len uint32
}

// VhostVDPAIOVARange mirrors struct vhost_vdpa_iova_range.
type VhostVDPAIOVARange struct {
	First uint64
	Last  uint64
}
