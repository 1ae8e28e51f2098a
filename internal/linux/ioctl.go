package linux

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Request is an ioctl request number, encoded as on amd64:
// dir<<30 | size<<16 | type<<8 | nr.
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
func Ioctl(fd int, req Request, arg unsafe.Pointer) error {
	return IoctlValue(fd, req, uintptr(arg))
}

// IoctlValue issues an ioctl whose argument is a plain value, not a pointer
// (TUNSETOFFLOAD, TUNSETPERSIST, VHOST_SET_OWNER with 0, ...).
func IoctlValue(fd int, req Request, arg uintptr) error {
	_, err := IoctlRet(fd, req, arg)
	return err
}

// IoctlRet issues an ioctl that returns a value (such as a new fd) instead
// of writing through a pointer.
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
// protocol numbers; amd64 is little-endian).
func Htons(v uint16) uint16 { return v<<8 | v>>8 }
