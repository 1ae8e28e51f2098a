// Package macvtap holds the backends vhost-net can attach to: tap devices
// (/dev/net/tun), macvtap queues (/dev/tapN) and packet sockets, each with
// its virtio-net header size and offloads.
//
// A Tap owns its queue fds and closes them in Close; a tap that is not
// persistent disappears with its last fd.
package macvtap
