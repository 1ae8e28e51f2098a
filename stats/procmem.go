package stats

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// iovMax is how many iovecs one process_vm_readv takes (UIO_MAXIOV).
const iovMax = 1024

// readU16s reads the little-endian 16-bit values at addrs in process
// pid's memory with process_vm_readv (Linux 3.2; needs ptrace access to
// pid: CAP_SYS_PTRACE, which root has unless it was dropped, and what
// Yama and the security modules allow; procErr says which refused). It
// stops nothing and writes nothing.
// Virtio 1 rings are little-endian; legacy rings are the guest's order,
// which is little-endian on x86 and arm64 guests.
//
// The local buffer is Go memory handed to the kernel inside the syscall's
// own argument list (unix.ProcessVMReadv); the remote addresses are
// numbers in QEMU's address space, never Go pointers.
//
// Another process is read only while it is the QEMU netctl means
// (checkReadable, before and after: see procident.go); a value read while
// it changed is discarded.
func readU16s(pid int, addrs []uint64) ([]uint16, error) {
	if pid == os.Getpid() {
		return readU16sOf(pid, addrs) // its own memory: nothing to guard
	}
	before, err := checkReadable(pid)
	if err != nil {
		return nil, err
	}
	out, err := readU16sOf(pid, addrs)
	if after, aerr := identify(pid); aerr != nil || after != before {
		return nil, fmt.Errorf("pid %d changed while netctl read it (exited, or exec'd another program): the values are discarded: %w", pid, ErrNotAvailable)
	}
	return out, err
}

func readU16sOf(pid int, addrs []uint64) ([]uint16, error) {
	out := make([]uint16, len(addrs))
	buf := make([]byte, 2*len(addrs))
	for start := 0; start < len(addrs); start += iovMax / 2 {
		end := min(start+iovMax/2, len(addrs))
		local := make([]unix.Iovec, 0, end-start)
		remote := make([]unix.RemoteIovec, 0, end-start)
		for i := start; i < end; i++ {
			iov := unix.Iovec{Base: &buf[2*i]}
			iov.SetLen(2)
			local = append(local, iov)
			remote = append(remote, unix.RemoteIovec{Base: uintptr(addrs[i]), Len: 2})
		}
		n, err := unix.ProcessVMReadv(pid, local, remote, 0)
		if err != nil {
			return nil, procErr(pid, err)
		}
		if want := 2 * (end - start); n != want {
			return nil, fmt.Errorf("process_vm_readv of pid %d: read %d of %d bytes: address %#x is not mapped (stale ring address): %w",
				pid, n, want, addrs[start+n/2], ErrNotAvailable)
		}
	}
	for i := range out {
		out[i] = binary.LittleEndian.Uint16(buf[2*i:])
	}
	return out, nil
}

// procErr says what a process_vm_readv error means.
func procErr(pid int, err error) error {
	switch {
	case errors.Is(err, unix.ESRCH):
		return fmt.Errorf("VM gone: QEMU (pid %d) has exited: %w", pid, ErrNotAvailable)
	case errors.Is(err, unix.EPERM):
		return permErr(pid, err, readPtraceEnv())
	case errors.Is(err, unix.EFAULT):
		return fmt.Errorf("process_vm_readv of QEMU (pid %d): a ring address is not mapped (stale): %w", pid, ErrNotAvailable)
	case errors.Is(err, unix.ENOSYS):
		return fmt.Errorf("process_vm_readv: %w: this kernel lacks CONFIG_CROSS_MEMORY_ATTACH", ErrNotSupported)
	}
	return fmt.Errorf("process_vm_readv of QEMU (pid %d): %w", pid, err)
}
