package vufront

import (
	"fmt"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/vhostuser"
	"github.com/netctl/netctl/virtio"
)

// WantProtocol is what Negotiate asks for by default: multiqueue,
// REPLY_ACK (every message acknowledged, as Cloud Hypervisor asks) and
// LOG_SHMFD (without which QEMU blocks migration).
const WantProtocol = vhostuser.ProtocolMQ | vhostuser.ProtocolReplyAck | vhostuser.ProtocolLogShmFD

// Negotiate runs the handshake up to SET_FEATURES, in QEMU's order:
// GET_FEATURES; if the backend offers bit 30, GET_PROTOCOL_FEATURES and
// SET_PROTOCOL_FEATURES with proto's share of what it offers, then
// GET_QUEUE_NUM with MQ; SET_OWNER; SET_FEATURES with want's share of the
// offered features (plus bit 30 when offered). It fails if a bit of
// required is not offered. It returns the acknowledged features.
func (f *Frontend) Negotiate(want, required virtio.Features, proto vhostuser.ProtocolFeatures) (virtio.Features, error) {
	v, err := f.get(vhostuser.GetFeatures)
	if err != nil {
		return 0, err
	}
	f.offered = virtio.Features(v)
	if miss := required &^ f.offered; miss != 0 {
		return 0, fmt.Errorf("vufront: the backend does not offer %v (offers %v)", miss, f.offered)
	}
	f.proto, f.maxQueues = 0, 1
	if f.offered.Has(FeatureProtocol) {
		p, err := f.get(vhostuser.GetProtocolFeatures)
		if err != nil {
			return 0, err
		}
		f.protoOffered = vhostuser.ProtocolFeatures(p)
		// SET_PROTOCOL_FEATURES itself is sent without NEED_REPLY: f.proto
		// is set after it.
		ack := proto & f.protoOffered
		if err := f.send(vhostuser.SetProtocolFeatures, vhostuser.U64(ack)); err != nil {
			return 0, err
		}
		f.proto = ack
		if ack.Has(vhostuser.ProtocolMQ) {
			if f.maxQueues, err = f.get(vhostuser.GetQueueNum); err != nil {
				return 0, err
			}
		}
	}
	if err := f.send(vhostuser.SetOwner, nil); err != nil {
		return 0, err
	}
	acked := want & f.offered
	if f.offered.Has(FeatureProtocol) {
		acked |= FeatureProtocol
	}
	if err := f.setFeatures(acked); err != nil {
		return 0, err
	}
	return acked, nil
}

// setFeatures sends SET_FEATURES and derives the header layout from it.
func (f *Frontend) setFeatures(acked virtio.Features) error {
	if err := f.send(vhostuser.SetFeatures, vhostuser.U64(acked)); err != nil {
		return err
	}
	f.acked = acked
	f.mergeable = acked.Has(virtio.NetMrgRxbuf)
	f.hdrLen = linux.VIRTIO_NET_HDR_LEN
	if acked&(virtio.Version1|virtio.NetMrgRxbuf) != 0 {
		f.hdrLen = linux.VIRTIO_NET_HDR_MRG_RXBUF_LEN
	}
	return nil
}

// ProtocolOffered is what GET_PROTOCOL_FEATURES returned.
func (f *Frontend) ProtocolOffered() vhostuser.ProtocolFeatures { return f.protoOffered }
