package vhostuser

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/virtio"
)

// TestBridgeHugetlbRegionUnmapped: a region of a hugetlbfs file whose size
// or offset is not a multiple of the huge page. The kernel maps whole huge
// pages, and munmap of a length that ends inside one fails (EINVAL from
// hugetlb_vm_op_split), so each such region a front-end sent stayed mapped
// after the session: a front-end could grow the bridge's address space
// (and pin hugetlbfs pages) without bound by reconnecting.
func TestBridgeHugetlbRegionUnmapped(t *testing.T) {
	r := startBridge(t, 1, nil)
	const huge = 2 << 20
	fd, err := unix.MemfdCreate("vu-huge", unix.MFD_HUGETLB|unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatalf("memfd_create(MFD_HUGETLB): %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Ftruncate(fd, 2*huge); err != nil {
		t.Fatal(err)
	}
	_, maps0 := resources(t)
	for i, reg := range []MemRegion{
		{GuestPhysAddr: 0, Size: testMemSize, UserAddr: testUaddr},                          // 1 MiB of a 2 MiB page
		{GuestPhysAddr: 0, Size: huge, UserAddr: testUaddr, MmapOffset: huge / 2},           // straddles two pages
		{GuestPhysAddr: 0, Size: huge + 4096, UserAddr: testUaddr, MmapOffset: huge - 4096}, // ends 4 KiB into the second
	} {
		f := dialFrontend(t, r.path)
		f.setupWith(MemoryTable{Regions: []MemRegion{reg}}, fd)
		if _, maps := resources(t); maps <= maps0 {
			t.Fatalf("region %d (%v) not mapped", i, reg)
		}
		f.c.Close()
		r.waitIdle(t, i+1)
		if _, maps := resources(t); maps != maps0 {
			t.Errorf("region %d (%v): %d front-end mappings after the session, %d before", i, reg, maps, maps0)
		}
	}
}

// setupWith negotiates REPLY_ACK and gives the bridge the memory table t.
func (f *testFrontend) setupWith(t MemoryTable, fds ...int) {
	f.t.Helper()
	f.get(GetFeatures, nil)
	f.must(SetProtocolFeatures, U64(ProtocolReplyAck|ProtocolMQ))
	f.proto = ProtocolReplyAck | ProtocolMQ
	f.must(SetFeatures, U64(virtio.Version1|virtio.Features(FeatureProtocolFeatures)))
	f.must(SetMemTable, t, fds...)
}
