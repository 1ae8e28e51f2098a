package linux

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Request is an ioctl request number in the asm-generic encoding that
// amd64 and arm64 share (the only architectures netctl builds for, see
// arch_unsupported.go): dir<<30 | size<<16 | type<<8 | nr.
type Request uint32

// Direction bits of an ioctl encoding (include/uapi/asm-generic/ioctl.h).
const (
	iocNone  = 0
	iocWrite = 1
	iocRead  = 2
)

// IOC encodes an ioctl request the way the kernel's _IOC macro does.
func IOC(dir, typ, nr, size uint32) Request {
	return Request(dir<<30 | size<<16 | typ<<8 | nr)
}

// IO, IOR, IOW and IOWR mirror the kernel macros of the same names.
func IO(typ, nr uint32) Request         { return IOC(iocNone, typ, nr, 0) }
func IOR(typ, nr, size uint32) Request  { return IOC(iocRead, typ, nr, size) }
func IOW(typ, nr, size uint32) Request  { return IOC(iocWrite, typ, nr, size) }
func IOWR(typ, nr, size uint32) Request { return IOC(iocRead|iocWrite, typ, nr, size) }
func (r Request) Dir() uint32           { return uint32(r) >> 30 }
func (r Request) Size() uint32          { return uint32(r) >> 16 & 0x3fff }
func (r Request) Type() uint32          { return uint32(r) >> 8 & 0xff }
func (r Request) Nr() uint32            { return uint32(r) & 0xff }

// String returns the kernel's name for r, or its hex value.
func (r Request) String() string {
	if n, ok := requestNames[r]; ok {
		return n
	}
	return fmt.Sprintf("ioctl(%#08x)", uint32(r))
}

// Error is the error of one failed ioctl. It unwraps to the unix.Errno, so
// errors.Is(err, unix.EPERM) and errors.Is(err, os.ErrPermission) work.
type Error struct {
	Request Request
	Errno   unix.Errno
}

func (e *Error) Error() string { return e.Request.String() + ": " + e.Errno.Error() }
func (e *Error) Unwrap() error { return e.Errno }

// Ioctl is the one place where netctl issues an ioctl with a pointer
// argument. The kernel reads from or writes to *arg as req says.
//
// The pointer stays an unsafe.Pointer until the argument list of
// unix.Syscall (an assembly function), where it becomes a uintptr in the
// same expression. That is the only form in which Go keeps the pointed-to
// object alive and in place for the whole system call (rule 4 of
// unsafe.Pointer): a uintptr handed down through ordinary Go calls is a
// plain integer, and if the goroutine's stack moves in between (it grows
// or shrinks at any call) the kernel reads or writes freed stack. x/sys's
// ioctlPtr and cilium/ebpf's sys.Pointer do the same.
func Ioctl(fd int, req Request, arg unsafe.Pointer) error {
	_, err := IoctlPtrRet(fd, req, arg)
	return err
}

// IoctlPtrRet is Ioctl for a request that also returns a value (such as
// VDUSE_IOTLB_GET_FD, which reads *arg and returns a new fd).
func IoctlPtrRet(fd int, req Request, arg unsafe.Pointer) (int, error) {
	for {
		r, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(arg))
		switch e {
		case 0:
			return int(r), nil
		case unix.EINTR:
			continue
		default:
			return -1, &Error{Request: req, Errno: e}
		}
	}
}

// IoctlValue issues an ioctl whose argument is a plain value, not a pointer
// (TUNSETOFFLOAD, TUNSETPERSIST, VHOST_SET_OWNER with 0, ...). Never pass an
// address here: use Ioctl.
func IoctlValue(fd int, req Request, arg uintptr) error {
	_, err := IoctlRet(fd, req, arg)
	return err
}

// IoctlRet issues an ioctl with a plain value argument that returns a
// value (such as a new fd). Never pass an address here: use IoctlPtrRet.
func IoctlRet(fd int, req Request, arg uintptr) (int, error) {
	for {
		r, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), arg)
		switch e {
		case 0:
			return int(r), nil
		case unix.EINTR:
			continue
		default:
			return -1, &Error{Request: req, Errno: e}
		}
	}
}

// GetU64 runs an ioctl that writes a __u64 (VHOST_GET_FEATURES, ...).
func GetU64(fd int, req Request) (uint64, error) {
	var v uint64
	err := Ioctl(fd, req, unsafe.Pointer(&v))
	return v, err
}

// SetU64 runs an ioctl that reads a __u64 (VHOST_SET_FEATURES, ...).
func SetU64(fd int, req Request, v uint64) error {
	return Ioctl(fd, req, unsafe.Pointer(&v))
}

// GetU32 runs an ioctl that writes a __u32 or int.
func GetU32(fd int, req Request) (uint32, error) {
	var v uint32
	err := Ioctl(fd, req, unsafe.Pointer(&v))
	return v, err
}

// SetI32 runs an ioctl that reads an int through a pointer.
func SetI32(fd int, req Request, v int32) error {
	return Ioctl(fd, req, unsafe.Pointer(&v))
}

// Htons converts a 16-bit value to network byte order (for AF_PACKET
// protocol numbers), whatever this machine's byte order.
func Htons(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return binary.NativeEndian.Uint16(b[:])
}

// MappedAddr is the address of b[0] as the kernel's structs carry it
// (vhost's userspace_addr, ring addresses, log_base, IOTLB uaddr). b must be
// memory that never moves and outlives the kernel's use of it: an mmap'd
// region (guest memory, a dirty log), never a Go stack variable. Every
// other conversion of a pointer to an integer in netctl happens in a
// syscall's own argument list (see Ioctl); TestNoPointerLaundering holds
// the tree to that.
func MappedAddr(b []byte, off int) uint64 {
	return uint64(uintptr(unsafe.Pointer(&b[off])))
}
