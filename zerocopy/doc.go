// Package zerocopy reports vhost-net's zero-copy transmit state (the
// vhost_net experimental_zcopytx module parameter), which backends qualify
// for it, and what to do to turn it on. (In progress: see the backends issue.)
package zerocopy
