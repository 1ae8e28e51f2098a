package linux

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestRequestEncoding re-derives every ioctl number from the kernel's macro
// (_IOR/_IOW/...) and the size of the mirrored struct, so a constant copied
// wrong or a struct of the wrong size fails here.
func TestRequestEncoding(t *testing.T) {
	const v, d, tt = VHOST_VIRTIO, VDUSE_BASE, 0x54
	S := func(x any) uint32 {
		switch x := x.(type) {
		case uint64, int64:
			return 8
		case uint32, int32:
			return 4
		case uint16:
			return 2
		case uint8:
			return 1
		case VhostVringState:
			return uint32(unsafe.Sizeof(x))
		case VhostVringFile:
			return uint32(unsafe.Sizeof(x))
		case VhostVringAddr:
			return uint32(unsafe.Sizeof(x))
		case VhostWorkerState:
			return uint32(unsafe.Sizeof(x))
		case VhostVringWorker:
			return uint32(unsafe.Sizeof(x))
		case VhostMemory:
			return uint32(unsafe.Sizeof(x))
		case VhostVDPAConfig:
			return uint32(unsafe.Sizeof(x))
		case VhostVDPAIOVARange:
			return uint32(unsafe.Sizeof(x))
		case VduseDevConfig:
			return uint32(unsafe.Sizeof(x))
		case VduseIOTLBEntry:
			return uint32(unsafe.Sizeof(x))
		case VduseConfigData:
			return uint32(unsafe.Sizeof(x))
		case VduseVQConfig:
			return uint32(unsafe.Sizeof(x))
		case VduseVQInfo:
			return uint32(unsafe.Sizeof(x))
		case VduseVQEventfd:
			return uint32(unsafe.Sizeof(x))
		case VduseIOVAUmem:
			return uint32(unsafe.Sizeof(x))
		case VduseIOVAInfo:
			return uint32(unsafe.Sizeof(x))
		case SockFprog:
			return uint32(unsafe.Sizeof(x))
		case [VDUSE_NAME_MAX]byte:
			return VDUSE_NAME_MAX
		}
		t.Fatalf("no size for %T", x)
		return 0
	}
	var (
		u64 uint64
		u32 uint32
		i32 int32
		u16 uint16
		u8  uint8
	)
	cases := map[Request]Request{
		VHOST_GET_FEATURES:               IOR(v, 0x00, S(u64)),
		VHOST_SET_FEATURES:               IOW(v, 0x00, S(u64)),
		VHOST_SET_OWNER:                  IO(v, 0x01),
		VHOST_RESET_OWNER:                IO(v, 0x02),
		VHOST_SET_MEM_TABLE:              IOW(v, 0x03, S(VhostMemory{})),
		VHOST_SET_LOG_BASE:               IOW(v, 0x04, S(u64)),
		VHOST_SET_LOG_FD:                 IOW(v, 0x07, S(i32)),
		VHOST_NEW_WORKER:                 IOR(v, 0x08, S(VhostWorkerState{})),
		VHOST_FREE_WORKER:                IOW(v, 0x09, S(VhostWorkerState{})),
		VHOST_SET_VRING_NUM:              IOW(v, 0x10, S(VhostVringState{})),
		VHOST_SET_VRING_ADDR:             IOW(v, 0x11, S(VhostVringAddr{})),
		VHOST_SET_VRING_BASE:             IOW(v, 0x12, S(VhostVringState{})),
		VHOST_GET_VRING_BASE:             IOWR(v, 0x12, S(VhostVringState{})),
		VHOST_SET_VRING_ENDIAN:           IOW(v, 0x13, S(VhostVringState{})),
		VHOST_GET_VRING_ENDIAN:           IOW(v, 0x14, S(VhostVringState{})),
		VHOST_ATTACH_VRING_WORKER:        IOW(v, 0x15, S(VhostVringWorker{})),
		VHOST_GET_VRING_WORKER:           IOWR(v, 0x16, S(VhostVringWorker{})),
		VHOST_SET_VRING_KICK:             IOW(v, 0x20, S(VhostVringFile{})),
		VHOST_SET_VRING_CALL:             IOW(v, 0x21, S(VhostVringFile{})),
		VHOST_SET_VRING_ERR:              IOW(v, 0x22, S(VhostVringFile{})),
		VHOST_SET_VRING_BUSYLOOP_TIMEOUT: IOW(v, 0x23, S(VhostVringState{})),
		VHOST_GET_VRING_BUSYLOOP_TIMEOUT: IOW(v, 0x24, S(VhostVringState{})),
		VHOST_SET_BACKEND_FEATURES:       IOW(v, 0x25, S(u64)),
		VHOST_GET_BACKEND_FEATURES:       IOR(v, 0x26, S(u64)),
		VHOST_NET_SET_BACKEND:            IOW(v, 0x30, S(VhostVringFile{})),
		VHOST_SET_FORK_FROM_OWNER:        IOW(v, 0x84, S(u8)),
		VHOST_GET_FORK_FROM_OWNER:        IOR(v, 0x85, S(u8)),
		VHOST_VDPA_GET_DEVICE_ID:         IOR(v, 0x70, S(u32)),
		VHOST_VDPA_GET_STATUS:            IOR(v, 0x71, S(u8)),
		VHOST_VDPA_SET_STATUS:            IOW(v, 0x72, S(u8)),
		VHOST_VDPA_GET_CONFIG:            IOR(v, 0x73, S(VhostVDPAConfig{})),
		VHOST_VDPA_SET_CONFIG:            IOW(v, 0x74, S(VhostVDPAConfig{})),
		VHOST_VDPA_SET_VRING_ENABLE:      IOW(v, 0x75, S(VhostVringState{})),
		VHOST_VDPA_GET_VRING_NUM:         IOR(v, 0x76, S(u16)),
		VHOST_VDPA_SET_CONFIG_CALL:       IOW(v, 0x77, S(i32)),
		VHOST_VDPA_GET_IOVA_RANGE:        IOR(v, 0x78, S(VhostVDPAIOVARange{})),
		VHOST_VDPA_GET_CONFIG_SIZE:       IOR(v, 0x79, S(u32)),
		VHOST_VDPA_GET_AS_NUM:            IOR(v, 0x7a, S(u32)),
		VHOST_VDPA_GET_VRING_GROUP:       IOWR(v, 0x7b, S(VhostVringState{})),
		VHOST_VDPA_SET_GROUP_ASID:        IOW(v, 0x7c, S(VhostVringState{})),
		VHOST_VDPA_SUSPEND:               IO(v, 0x7d),
		VHOST_VDPA_RESUME:                IO(v, 0x7e),
		VHOST_VDPA_GET_VRING_DESC_GROUP:  IOWR(v, 0x7f, S(VhostVringState{})),
		VHOST_VDPA_GET_VQS_COUNT:         IOR(v, 0x80, S(u32)),
		VHOST_VDPA_GET_GROUP_NUM:         IOR(v, 0x81, S(u32)),
		VHOST_VDPA_GET_VRING_SIZE:        IOWR(v, 0x82, S(VhostVringState{})),

		VDUSE_GET_API_VERSION:       IOR(d, 0x00, S(u64)),
		VDUSE_SET_API_VERSION:       IOW(d, 0x01, S(u64)),
		VDUSE_CREATE_DEV:            IOW(d, 0x02, S(VduseDevConfig{})),
		VDUSE_DESTROY_DEV:           IOW(d, 0x03, S([VDUSE_NAME_MAX]byte{})),
		VDUSE_IOTLB_GET_FD:          IOWR(d, 0x10, S(VduseIOTLBEntry{})),
		VDUSE_DEV_GET_FEATURES:      IOR(d, 0x11, S(u64)),
		VDUSE_DEV_SET_CONFIG:        IOW(d, 0x12, S(VduseConfigData{})),
		VDUSE_DEV_INJECT_CONFIG_IRQ: IO(d, 0x13),
		VDUSE_VQ_SETUP:              IOW(d, 0x14, S(VduseVQConfig{})),
		VDUSE_VQ_GET_INFO:           IOWR(d, 0x15, S(VduseVQInfo{})),
		VDUSE_VQ_SETUP_KICKFD:       IOW(d, 0x16, S(VduseVQEventfd{})),
		VDUSE_VQ_INJECT_IRQ:         IOW(d, 0x17, S(u32)),
		VDUSE_IOTLB_REG_UMEM:        IOW(d, 0x18, S(VduseIOVAUmem{})),
		VDUSE_IOTLB_DEREG_UMEM:      IOW(d, 0x19, S(VduseIOVAUmem{})),
		VDUSE_IOTLB_GET_INFO:        IOWR(d, 0x1a, S(VduseIOVAInfo{})),

		TUNSETNOCSUM:       IOW(tt, 200, S(i32)),
		TUNSETDEBUG:        IOW(tt, 201, S(i32)),
		TUNSETIFF:          IOW(tt, 202, S(i32)),
		TUNSETPERSIST:      IOW(tt, 203, S(i32)),
		TUNSETOWNER:        IOW(tt, 204, S(i32)),
		TUNSETLINK:         IOW(tt, 205, S(i32)),
		TUNSETGROUP:        IOW(tt, 206, S(i32)),
		TUNGETFEATURES:     IOR(tt, 207, S(u32)),
		TUNSETOFFLOAD:      IOW(tt, 208, S(u32)),
		TUNSETTXFILTER:     IOW(tt, 209, S(u32)),
		TUNGETIFF:          IOR(tt, 210, S(u32)),
		TUNGETSNDBUF:       IOR(tt, 211, S(i32)),
		TUNSETSNDBUF:       IOW(tt, 212, S(i32)),
		TUNATTACHFILTER:    IOW(tt, 213, S(SockFprog{})),
		TUNDETACHFILTER:    IOW(tt, 214, S(SockFprog{})),
		TUNGETVNETHDRSZ:    IOR(tt, 215, S(i32)),
		TUNSETVNETHDRSZ:    IOW(tt, 216, S(i32)),
		TUNSETQUEUE:        IOW(tt, 217, S(i32)),
		TUNSETIFINDEX:      IOW(tt, 218, S(u32)),
		TUNGETFILTER:       IOR(tt, 219, S(SockFprog{})),
		TUNSETVNETLE:       IOW(tt, 220, S(i32)),
		TUNGETVNETLE:       IOR(tt, 221, S(i32)),
		TUNSETVNETBE:       IOW(tt, 222, S(i32)),
		TUNGETVNETBE:       IOR(tt, 223, S(i32)),
		TUNSETSTEERINGEBPF: IOR(tt, 224, S(i32)),
		TUNSETFILTEREBPF:   IOR(tt, 225, S(i32)),
		TUNSETCARRIER:      IOW(tt, 226, S(i32)),
		TUNGETDEVNETNS:     IO(tt, 227),
	}
	for got, want := range cases {
		if got != want {
			t.Errorf("%v = %#08x, the kernel macro gives %#08x", got, uint32(got), uint32(want))
		}
	}
	if len(cases) != len(requestNames) {
		t.Errorf("%d requests checked, %d named: add the new ones to this test", len(cases), len(requestNames))
	}
	// Cross-check with golang.org/x/sys/unix where it has the same constant.
	for got, want := range map[Request]uint{TUNSETIFF: unix.TUNSETIFF, TUNSETOFFLOAD: unix.TUNSETOFFLOAD,
		TUNSETVNETHDRSZ: unix.TUNSETVNETHDRSZ, TUNGETFEATURES: unix.TUNGETFEATURES, TUNSETQUEUE: unix.TUNSETQUEUE} {
		if uint(got) != want {
			t.Errorf("%v = %#x, x/sys/unix has %#x", got, uint32(got), want)
		}
	}
}

// TestRequestNamesComplete parses this package's source and checks that
// every Request constant has a name in names.go, so errors never print a
// bare number for a request netctl defines.
func TestRequestNamesComplete(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	fset := token.NewFileSet()
	n := 0
	for _, name := range files {
		if filepath.Ext(name) != ".go" || len(name) > 8 && name[len(name)-8:] == "_test.go" {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		file, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(node ast.Node) bool {
			vs, ok := node.(*ast.ValueSpec)
			if !ok || vs.Type == nil {
				return true
			}
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Request" {
				return true
			}
			for _, id := range vs.Names {
				n++
				found := false
				for _, s := range requestNames {
					if s == id.Name {
						found = true
					}
				}
				if !found {
					t.Errorf("%s has no entry in requestNames (names.go)", id.Name)
				}
			}
			return true
		})
	}
	if n != len(requestNames) {
		t.Errorf("%d Request constants, %d names", n, len(requestNames))
	}
}

func TestErrorWrapsErrno(t *testing.T) {
	// An ioctl on a closed fd: EBADF, named and unwrappable.
	err := Ioctl(-1, VHOST_SET_OWNER, nil)
	var e *Error
	if !errors.As(err, &e) || e.Request != VHOST_SET_OWNER || !errors.Is(err, unix.EBADF) {
		t.Fatalf("got %v, want *Error for VHOST_SET_OWNER wrapping EBADF", err)
	}
	if got, want := err.Error(), "VHOST_SET_OWNER: bad file descriptor"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got := Request(0x1234).String(); got != "ioctl(0x00001234)" {
		t.Errorf("unknown request prints %q", got)
	}
	if VHOST_SET_VRING_ADDR.Size() != 40 || VHOST_SET_VRING_ADDR.Nr() != 0x11 || VHOST_SET_VRING_ADDR.Type() != 0xaf || VHOST_SET_VRING_ADDR.Dir() != 1 {
		t.Errorf("decoding VHOST_SET_VRING_ADDR: dir %d type %#x nr %#x size %d", VHOST_SET_VRING_ADDR.Dir(),
			VHOST_SET_VRING_ADDR.Type(), VHOST_SET_VRING_ADDR.Nr(), VHOST_SET_VRING_ADDR.Size())
	}
}
