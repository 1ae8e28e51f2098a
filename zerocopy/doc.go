// Package zerocopy reports whether vhost-net transmits guest buffers
// without copying them (zero-copy TX), which backends qualify, and what to
// do to turn it on.
//
// The switch is the vhost_net module parameter experimental_zcopytx: off
// by default, read-only once the module is loaded (mode 0444), so turning
// it on means reloading vhost_net while nothing uses it. Even when on,
// vhost copies frames shorter than 256 bytes (VHOST_GOODCOPY_LEN) and
// falls back to copying when too many zero-copy buffers are in flight.
package zerocopy
