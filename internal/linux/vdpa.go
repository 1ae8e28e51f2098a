package linux

// The vdpa generic-netlink family (include/uapi/linux/vdpa.h). It has no
// family header and exists only in the initial network namespace.
const (
	VDPA_GENL_NAME    = "vdpa"
	VDPA_GENL_VERSION = 0x1
)

// vdpa commands.
const (
	VDPA_CMD_UNSPEC         = 0
	VDPA_CMD_MGMTDEV_NEW    = 1 // reply to MGMTDEV_GET
	VDPA_CMD_MGMTDEV_GET    = 2
	VDPA_CMD_DEV_NEW        = 3 // needs CAP_NET_ADMIN; reply to DEV_GET
	VDPA_CMD_DEV_DEL        = 4 // needs CAP_NET_ADMIN
	VDPA_CMD_DEV_GET        = 5
	VDPA_CMD_DEV_CONFIG_GET = 6
	VDPA_CMD_DEV_VSTATS_GET = 7 // needs CAP_NET_ADMIN
	VDPA_CMD_DEV_ATTR_SET   = 8 // needs CAP_NET_ADMIN
)

// vdpa attributes.
const (
	VDPA_ATTR_UNSPEC                           = 0
	VDPA_ATTR_PAD                              = 0
	VDPA_ATTR_MGMTDEV_BUS_NAME                 = 1  // string
	VDPA_ATTR_MGMTDEV_DEV_NAME                 = 2  // string
	VDPA_ATTR_MGMTDEV_SUPPORTED_CLASSES        = 3  // u64, 1<<virtio device id
	VDPA_ATTR_DEV_NAME                         = 4  // string
	VDPA_ATTR_DEV_ID                           = 5  // u32
	VDPA_ATTR_DEV_VENDOR_ID                    = 6  // u32
	VDPA_ATTR_DEV_MAX_VQS                      = 7  // u32
	VDPA_ATTR_DEV_MAX_VQ_SIZE                  = 8  // u16
	VDPA_ATTR_DEV_MIN_VQ_SIZE                  = 9  // u16
	VDPA_ATTR_DEV_NET_CFG_MACADDR              = 10 // binary, 6 bytes
	VDPA_ATTR_DEV_NET_STATUS                   = 11 // emitted as u16 although documented u8
	VDPA_ATTR_DEV_NET_CFG_MAX_VQP              = 12 // u16
	VDPA_ATTR_DEV_NET_CFG_MTU                  = 13 // u16
	VDPA_ATTR_DEV_NEGOTIATED_FEATURES          = 14 // u64
	VDPA_ATTR_DEV_MGMTDEV_MAX_VQS              = 15 // u32
	VDPA_ATTR_DEV_SUPPORTED_FEATURES           = 16 // u64
	VDPA_ATTR_DEV_QUEUE_INDEX                  = 17 // u32
	VDPA_ATTR_DEV_VENDOR_ATTR_NAME             = 18 // string
	VDPA_ATTR_DEV_VENDOR_ATTR_VALUE            = 19 // u64
	VDPA_ATTR_DEV_FEATURES                     = 20 // u64
	VDPA_ATTR_DEV_BLK_CFG_CAPACITY             = 21
	VDPA_ATTR_DEV_BLK_CFG_SIZE_MAX             = 22
	VDPA_ATTR_DEV_BLK_CFG_BLK_SIZE             = 23
	VDPA_ATTR_DEV_BLK_CFG_SEG_MAX              = 24
	VDPA_ATTR_DEV_BLK_CFG_NUM_QUEUES           = 25
	VDPA_ATTR_DEV_BLK_CFG_PHY_BLK_EXP          = 26
	VDPA_ATTR_DEV_BLK_CFG_ALIGN_OFFSET         = 27
	VDPA_ATTR_DEV_BLK_CFG_MIN_IO_SIZE          = 28
	VDPA_ATTR_DEV_BLK_CFG_OPT_IO_SIZE          = 29
	VDPA_ATTR_DEV_BLK_CFG_MAX_DISCARD_SEC      = 30
	VDPA_ATTR_DEV_BLK_CFG_MAX_DISCARD_SEG      = 31
	VDPA_ATTR_DEV_BLK_CFG_DISCARD_SEC_ALIGN    = 32
	VDPA_ATTR_DEV_BLK_CFG_MAX_WRITE_ZEROES_SEC = 33
	VDPA_ATTR_DEV_BLK_CFG_MAX_WRITE_ZEROES_SEG = 34
	VDPA_ATTR_DEV_BLK_READ_ONLY                = 35
	VDPA_ATTR_DEV_BLK_FLUSH                    = 36
	VDPA_ATTR_MAX                              = 37
)
