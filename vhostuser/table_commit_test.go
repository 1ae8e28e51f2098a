package vhostuser

import (
	"fmt"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/virtio"
)

// TestBridgeTableKeptAfterAttachFailure: a SET_MEM_TABLE that vhost-net
// accepts but after which a ring fails to attach is refused to the
// front-end, yet the devices hold the new table: its mappings must stay
// (unmapping them left vhost-net with addresses of unmapped memory, which
// the next mmap of this process, the Go heap's included, could reuse).
func TestBridgeTableKeptAfterAttachFailure(t *testing.T) {
	r := startBridge(t, 1, nil)
	f := dialFrontend(t, r.path)
	f.get(GetFeatures, nil)
	f.must(SetProtocolFeatures, U64(ProtocolReplyAck|ProtocolMQ))
	f.proto = ProtocolReplyAck | ProtocolMQ
	f.must(SetFeatures, U64(virtio.Version1|virtio.Features(FeatureProtocolFeatures)))
	// Ring 0 complete but for memory: the table attaches it.
	f.must(SetVringNum, VringState{Index: 0, Num: testRingNum})
	f.must(SetVringAddr, f.ringAddr(0))
	f.must(SetVringKick, RingFile{Index: 0}, f.efd)
	f.must(SetVringEnable, VringState{Index: 0, Num: 1})
	r.k.failAfter(fmt.Sprintf("SetBackend(0,%d)", r.tap.QueueFD(0)), 0, unix.EFAULT)
	f.refused(SetMemTable, f.table(), f.mem)
	d := r.k.dev(0)
	if len(d.table) != 1 {
		t.Fatalf("device 0 table %+v: want the new table (vhost-net took it)", d.table)
	}
	if err := checkMapping(d.table[0].UserAddr, "memfd:vu-test"); err != nil {
		t.Errorf("vhost-net's memory table points at %#x: %v", d.table[0].UserAddr, err)
	}
	// The ring can still start on that table.
	f.must(SetVringKick, RingFile{Index: 0}, f.efd)
	if d := r.k.dev(0); d.vr[0].backend != r.tap.QueueFD(0) {
		t.Errorf("ring 0 backend %d after a new kick, want the tap queue", d.vr[0].backend)
	}
}
