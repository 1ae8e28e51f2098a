package linux

// VDUSE ioctls (include/uapi/linux/vduse.h, Linux 6.12). VDUSE_BASE = 0x81.
const (
	VDUSE_BASE = 0x81

	VDUSE_GET_API_VERSION       Request = 0x80088100
	VDUSE_SET_API_VERSION       Request = 0x40088101
	VDUSE_CREATE_DEV            Request = 0x41508102 // size covers the fixed part; config follows
	VDUSE_DESTROY_DEV           Request = 0x41008103
	VDUSE_IOTLB_GET_FD          Request = 0xc0208110
	VDUSE_DEV_GET_FEATURES      Request = 0x80088111
	VDUSE_DEV_SET_CONFIG        Request = 0x40088112
	VDUSE_DEV_INJECT_CONFIG_IRQ Request = 0x00008113
	VDUSE_VQ_SETUP              Request = 0x40208114
	VDUSE_VQ_GET_INFO           Request = 0xc0308115
	VDUSE_VQ_SETUP_KICKFD       Request = 0x40088116
	VDUSE_VQ_INJECT_IRQ         Request = 0x40048117
	VDUSE_IOTLB_REG_UMEM        Request = 0x40308118
	VDUSE_IOTLB_DEREG_UMEM      Request = 0x40308119
	VDUSE_IOTLB_GET_INFO        Request = 0xc030811a
)

// VDUSE constants (vduse.h).
const (
	VDUSE_API_VERSION = 0 // the only version in 6.12
	VDUSE_NAME_MAX    = 256

	VDUSE_GET_VQ_STATE = 0 // request types
	VDUSE_SET_STATUS   = 1
	VDUSE_UPDATE_IOTLB = 2

	VDUSE_REQ_RESULT_OK     = 0
	VDUSE_REQ_RESULT_FAILED = 1

	VDUSE_ACCESS_RO = 1
	VDUSE_ACCESS_WO = 2
	VDUSE_ACCESS_RW = 3

	VDUSE_IOVA_CAP_UMEM = 1

	VDUSE_MSG_SIZE = 152 // sizeof(struct vduse_dev_request) == sizeof(struct vduse_dev_response)
)

// VduseDevConfig mirrors struct vduse_dev_config without its flexible
// config[] array; ConfigSize bytes of config space follow it in the ioctl.
type VduseDevConfig struct {
	Name       [VDUSE_NAME_MAX]byte
	VendorID   uint32
	DeviceID   uint32
	Features   uint64
	VQNum      uint32
	VQAlign    uint32
	Reserved   [13]uint32
	ConfigSize uint32
}

// VduseIOTLBEntry mirrors struct vduse_iotlb_entry.
type VduseIOTLBEntry struct {
	Offset uint64
	Start  uint64
	Last   uint64
	Perm   uint8
	_      [7]byte
}

// VduseConfigData mirrors the header of struct vduse_config_data.
type VduseConfigData struct {
	Offset uint32
	Length uint32
}

// VduseVQConfig mirrors struct vduse_vq_config.
type VduseVQConfig struct {
	Index    uint32
	MaxSize  uint16
	Reserved [13]uint16
}

// VduseVQStatePacked mirrors struct vduse_vq_state_packed.
type VduseVQStatePacked struct {
	LastAvailCounter uint16
	LastAvailIdx     uint16
	LastUsedCounter  uint16
	LastUsedIdx      uint16
}

// VduseVQInfo mirrors struct vduse_vq_info. The union of split and packed
// state is held as 8 bytes: SplitAvailIndex reads the split member.
type VduseVQInfo struct {
	Index      uint32
	Num        uint32
	DescAddr   uint64
	DriverAddr uint64
	DeviceAddr uint64
	State      [8]byte // union { vduse_vq_state_split split; vduse_vq_state_packed packed; }
	Ready      uint8
	_          [7]byte
}

// VduseVQEventfd mirrors struct vduse_vq_eventfd.
type VduseVQEventfd struct {
	Index uint32
	FD    int32
}

// VduseIOVAUmem mirrors struct vduse_iova_umem.
type VduseIOVAUmem struct {
	UAddr    uint64
	IOVA     uint64
	Size     uint64
	Reserved [3]uint64
}

// VduseIOVAInfo mirrors struct vduse_iova_info.
type VduseIOVAInfo struct {
	Start      uint64
	Last       uint64
	Capability uint64
	Reserved   [3]uint64
}

// VduseVQState mirrors struct vduse_vq_state: an index and the 8-byte union
// of split and packed state.
type VduseVQState struct {
	Index uint32
	State [8]byte
}

// VduseIOVARange mirrors struct vduse_iova_range.
type VduseIOVARange struct {
	Start uint64
	Last  uint64
}

// VduseDevRequest mirrors struct vduse_dev_request (152 bytes, 8-aligned).
// Payload is the 128-byte union: vq_state, s (the status byte) or iova.
type VduseDevRequest struct {
	Type      uint32
	RequestID uint32
	Reserved  [4]uint32
	Payload   [128]byte
}

// VduseDevResponse mirrors struct vduse_dev_response (152 bytes, 4-aligned).
type VduseDevResponse struct {
	RequestID uint32
	Result    uint32
	Reserved  [4]uint32
	Payload   [128]byte
}
