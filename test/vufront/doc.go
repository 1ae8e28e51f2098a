// Package vufront is netctl's own vhost-user frontend, for tests and
// benchmarks of the vhost-user bridge (package vhostuser, netctl
// vhost-user): it plays the VMM's part (QEMU's hw/virtio/vhost-user.c,
// Cloud Hypervisor's vu_common_ctrl.rs) with the userspace virtio driver of
// vhostnet/guest as the guest. Guest memory is one memfd (GPA 0 at its
// start) shared with the backend through SET_MEM_TABLE; the rings live in
// it, and ring addresses are sent as this process's user addresses, as a
// VMM sends its own.
//
// Lifecycle: Dial connects to the backend's socket; Negotiate runs the
// feature handshake (GET_FEATURES, GET/SET_PROTOCOL_FEATURES,
// GET_QUEUE_NUM, SET_OWNER, SET_FEATURES); SetupQueues sends the memory
// table and every ring (NUM, BASE, ADDR, KICK, CALL, then ENABLE) and
// fills the receive rings; Send and Recv move frames; StopRing
// (GET_VRING_BASE) and StartRing stop and restart one ring; EnableLog
// gives the backend a dirty log (LOG_SHMFD, SET_LOG_BASE) and turns on
// VHOST_F_LOG_ALL; Reconnect dials again and repeats the handshake on the
// same memory and rings (what QEMU does when its reconnect= chardev
// reconnects); Close closes the connection and frees everything.
//
// Ownership: the Frontend owns the connection, the memfd, every eventfd
// (each ring's kick and call, inside its guest.Queue) and the log memfd.
// The backend receives copies of them over SCM_RIGHTS; closing the
// Frontend does not close the backend's copies.
//
// A Frontend is not safe for concurrent use.
package vufront
