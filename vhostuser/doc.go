// Package vhostuser serves the vhost-user protocol (QEMU's
// docs/interop/vhost-user.rst) as a net back-end and bridges it onto the
// kernel's vhost-net: the front-end's (QEMU's, Cloud Hypervisor's) memory
// is mapped here and handed to /dev/vhost-net, its ring addresses are
// translated, its kick, call and err eventfds go straight to the kernel,
// and a tap or macvtap is attached as the backend. Packets then move
// between the guest's rings and the tap inside the kernel; they never pass
// through this process.
//
// # The codec
//
// ReadMessage reads one message and its SCM_RIGHTS fds, bounded (payload
// at most MaxPayload bytes, at most MaxFDs fds, extra fds closed);
// Decode turns it into a typed Body after checking its size and fd count
// against its request; WriteMessage writes one. Decode is pure and is the
// fuzzing target. A Message from ReadMessage owns its fds: CloseFDs, or
// TakeFD to keep one.
package vhostuser
