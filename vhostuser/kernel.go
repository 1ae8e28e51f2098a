package vhostuser

import (
	"github.com/netctl/netctl/vhostnet"
	"github.com/netctl/netctl/virtio"
)

// Vhost is what the bridge asks of one vhost-net device (one queue pair):
// the calls of *vhostnet.Device it uses. The bridge owns each Vhost it
// opened and closes it in Close. Tests put a fake here.
type Vhost interface {
	SetOwner() error
	ResetOwner() error
	Features() (virtio.Features, error)
	SetFeatures(virtio.Features) error
	SetMemTable([]vhostnet.MemoryRegion) error
	SetLogBase(addr uint64) error
	SetLogFD(eventfd int) error
	SetVringNum(idx, num uint32) error
	SetVringBase(idx uint32, base uint16) error
	VringBase(idx uint32) (uint16, error)
	SetVringAddr(idx uint32, a vhostnet.VringAddr) error
	SetVringKick(idx uint32, eventfd int) error
	SetVringCall(idx uint32, eventfd int) error
	SetVringErr(idx uint32, eventfd int) error
	SetBusyLoopTimeout(idx, usec uint32) error
	SetBackend(idx uint32, fd int) error
	Close() error
}

var _ Vhost = (*vhostnet.Device)(nil)

// openVhostNet opens /dev/vhost-net.
func openVhostNet() (Vhost, error) { return vhostnet.Open() }
