// Package vhostuser serves the vhost-user protocol (QEMU's
// docs/interop/vhost-user.rst) as a net back-end and bridges it onto the
// kernel's vhost-net: the front-end's (QEMU's, Cloud Hypervisor's) memory
// is mapped here and handed to /dev/vhost-net, its ring addresses are
// translated, its kick, call and err eventfds go straight to the kernel,
// and a tap or macvtap is attached as the backend. Packets then move
// between the guest's rings and the tap inside the kernel; they never pass
// through this process. `netctl vhost-user` is its command.
//
// # The codec
//
// ReadMessage reads one message and its SCM_RIGHTS fds, bounded (payload
// at most MaxPayload bytes, at most MaxFDs fds, every fd of a message over
// a bound closed); Decode turns it into a typed Body after checking its
// exact size and fd count against its request; WriteMessage writes one.
// Decode is pure and is the fuzzing target. A Message from ReadMessage
// owns its fds: CloseFDs, or TakeFD to keep one.
//
// # The bridge: lifecycle and fds
//
// NewBridge opens one vhost-net device per queue pair (Config.Queues)
// and listens on Config.Socket (mode 0600, owned by Config.Owner). The
// Bridge owns the devices and the socket; it never owns Config.Backend,
// whose queue q is the backend of queue pair q. Serve accepts one
// front-end at a time (a second connection is closed at once and
// counted); a session starts with VHOST_SET_OWNER on every device and
// ends, however the front-end leaves, with every ring detached and
// VHOST_RESET_OWNER, which drops the memory table, the eventfds, the log
// and the worker; the session's mappings are unmapped. The fds a
// front-end sends are closed once the message is handled: vhost-net keeps
// its own reference to each eventfd and a mapping keeps its file. Close
// removes the socket (only if it is still the one NewBridge made) and
// closes the devices.
//
// Because the devices are opened once, the process needs no privilege
// after NewBridge: DropPrivileges drops it for good and makes the process
// non-dumpable (the VMM runs as the same user). VHOST_SET_OWNER,
// VHOST_RESET_OWNER and the tap's TUNSETVNETHDRSZ and TUNSETOFFLOAD on
// open fds need none.
//
// # Rings, memory and features
//
// Ring q is vring q%2 (RX, TX) of device q/2. A ring runs (its tap queue
// attached with VHOST_NET_SET_BACKEND) when it has a size, addresses that
// lie in the front-end's memory, a kick eventfd since it last stopped, the
// front-end acknowledged its features and the ring is enabled; once bit 30
// (VHOST_USER_F_PROTOCOL_FEATURES) is acknowledged, rings start disabled.
// Disabled, or stopped by GET_VRING_BASE (which detaches first, then
// reads the base), is a ring without a backend. SET_MEM_TABLE, ADD_MEM_REG
// and REM_MEM_REG each become a full VHOST_SET_MEM_TABLE on every device,
// and every ring's addresses are translated again. SET_FEATURES sets the
// tap's header size and offloads (macvtap.ApplyGuestFeatures) and gives
// vhost-net only the ring bits.
//
// The dirty log: vhost-net logs at its log base plus gpa/32768 whether or
// not a log was set (0 then, so anywhere in this process). LOG_ALL and a
// ring whose used ring is logged (VHOST_VRING_F_LOG) are therefore held
// back from vhost-net until SET_LOG_BASE has mapped a log covering every
// region, and no ring affected runs meanwhile; QEMU sends both before
// SET_LOG_BASE when it starts a device during migration.
//
// Every message is checked before any mapping or ioctl (Decode, then
// validate.go's rules); a refused one gets a failure REPLY_ACK when the
// front-end asked for one, else the connection is closed.
//
// Kernel minimum: vhost-net (Linux 2.6.33); tested on 6.1 and 6.12.
package vhostuser
