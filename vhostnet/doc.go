// Package vhostnet drives the kernel's vhost-net device (/dev/vhost-net).
//
// One Device is one open /dev/vhost-net fd and drives one virtio-net queue
// pair (virtqueue 0 is RX, 1 is TX). The Device owns its fd and closes it in
// Close. The owner is the process that called SetOwner (any of its threads
// may then issue calls, which suits Go).
//
// Minimum kernel: vhost-net has been in Linux since 2.6.33; the features it
// reports differ by version (6.12 adds RING_RESET, which 6.1 lacks).
package vhostnet
