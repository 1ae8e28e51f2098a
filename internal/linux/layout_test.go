package linux

import (
	"testing"
	"unsafe"
)

// field is one expected field: its offset and size, as computed by gcc
// against the 6.12.117 UAPI headers (kernel-facts.md §1.3, §3.3, §4.4, §5.3).
type field struct {
	name         string
	gotOff, want uintptr
	gotSize      uintptr
	wantSize     uintptr
}

type layout struct {
	name          string
	gotSize, want uintptr
	fields        []field
}

func f(name string, off, wantOff, size, wantSize uintptr) field {
	return field{name, off, wantOff, size, wantSize}
}

func TestStructLayouts(t *testing.T) {
	var (
		vs   VhostVringState
		vf   VhostVringFile
		va   VhostVringAddr
		vw   VhostVringWorker
		vm   VhostMemory
		vr   VhostMemoryRegion
		im   VhostIOTLBMsg
		m1   VhostMsg
		m2   VhostMsgV2
		vc   VhostVDPAConfig
		ir   VhostVDPAIOVARange
		dc   VduseDevConfig
		ie   VduseIOTLBEntry
		cd   VduseConfigData
		qc   VduseVQConfig
		qi   VduseVQInfo
		qe   VduseVQEventfd
		um   VduseIOVAUmem
		ii   VduseIOVAInfo
		qs   VduseVQState
		rq   VduseDevRequest
		rs   VduseDevResponse
		ifr  Ifreq
		pi   TunPI
		fp   SockFprog
		h    VirtioNetHdr
		h1   VirtioNetHdrV1
		hh   VirtioNetHdrV1Hash
		nc   VirtioNetConfig
		desc VringDesc
	)
	cases := []layout{
		{"vhost_vring_state", unsafe.Sizeof(vs), 8, []field{f("index", unsafe.Offsetof(vs.Index), 0, unsafe.Sizeof(vs.Index), 4), f("num", unsafe.Offsetof(vs.Num), 4, unsafe.Sizeof(vs.Num), 4)}},
		{"vhost_vring_file", unsafe.Sizeof(vf), 8, []field{f("index", unsafe.Offsetof(vf.Index), 0, unsafe.Sizeof(vf.Index), 4), f("fd", unsafe.Offsetof(vf.FD), 4, unsafe.Sizeof(vf.FD), 4)}},
		{"vhost_vring_addr", unsafe.Sizeof(va), 40, []field{
			f("index", unsafe.Offsetof(va.Index), 0, unsafe.Sizeof(va.Index), 4), f("flags", unsafe.Offsetof(va.Flags), 4, unsafe.Sizeof(va.Flags), 4),
			f("desc_user_addr", unsafe.Offsetof(va.DescUserAddr), 8, unsafe.Sizeof(va.DescUserAddr), 8),
			f("used_user_addr", unsafe.Offsetof(va.UsedUserAddr), 16, unsafe.Sizeof(va.UsedUserAddr), 8),
			f("avail_user_addr", unsafe.Offsetof(va.AvailUserAddr), 24, unsafe.Sizeof(va.AvailUserAddr), 8),
			f("log_guest_addr", unsafe.Offsetof(va.LogGuestAddr), 32, unsafe.Sizeof(va.LogGuestAddr), 8)}},
		{"vhost_worker_state", unsafe.Sizeof(VhostWorkerState{}), 4, nil},
		{"vhost_vring_worker", unsafe.Sizeof(vw), 8, []field{f("index", unsafe.Offsetof(vw.Index), 0, 4, 4), f("worker_id", unsafe.Offsetof(vw.WorkerID), 4, 4, 4)}},
		{"vhost_memory", unsafe.Sizeof(vm), 8, []field{f("nregions", unsafe.Offsetof(vm.NRegions), 0, 4, 4), f("padding", unsafe.Offsetof(vm.Padding), 4, 4, 4)}},
		{"vhost_memory_region", unsafe.Sizeof(vr), 32, []field{
			f("guest_phys_addr", unsafe.Offsetof(vr.GuestPhysAddr), 0, 8, 8), f("memory_size", unsafe.Offsetof(vr.MemorySize), 8, 8, 8),
			f("userspace_addr", unsafe.Offsetof(vr.UserspaceAddr), 16, 8, 8), f("flags_padding", unsafe.Offsetof(vr.FlagsPadding), 24, 8, 8)}},
		{"vhost_iotlb_msg", unsafe.Sizeof(im), 32, []field{
			f("iova", unsafe.Offsetof(im.IOVA), 0, 8, 8), f("size", unsafe.Offsetof(im.Size), 8, 8, 8), f("uaddr", unsafe.Offsetof(im.UAddr), 16, 8, 8),
			f("perm", unsafe.Offsetof(im.Perm), 24, unsafe.Sizeof(im.Perm), 1), f("type", unsafe.Offsetof(im.Type), 25, unsafe.Sizeof(im.Type), 1)}},
		{"vhost_msg", unsafe.Sizeof(m1), 72, []field{f("type", unsafe.Offsetof(m1.Type), 0, unsafe.Sizeof(m1.Type), 4), f("iotlb", unsafe.Offsetof(m1.IOTLB), 8, unsafe.Sizeof(m1.IOTLB), 32)}},
		{"vhost_msg_v2", unsafe.Sizeof(m2), 72, []field{
			f("type", unsafe.Offsetof(m2.Type), 0, 4, 4), f("asid", unsafe.Offsetof(m2.ASID), 4, unsafe.Sizeof(m2.ASID), 4), f("iotlb", unsafe.Offsetof(m2.IOTLB), 8, unsafe.Sizeof(m2.IOTLB), 32)}},
		{"vhost_vdpa_config", unsafe.Sizeof(vc), 8, []field{f("off", unsafe.Offsetof(vc.Off), 0, 4, 4), f("len", unsafe.Offsetof(vc.Len), 4, 4, 4)}},
		{"vhost_vdpa_iova_range", unsafe.Sizeof(ir), 16, []field{f("first", unsafe.Offsetof(ir.First), 0, 8, 8), f("last", unsafe.Offsetof(ir.Last), 8, 8, 8)}},
		{"vduse_dev_config", unsafe.Sizeof(dc), 336, []field{
			f("name", unsafe.Offsetof(dc.Name), 0, unsafe.Sizeof(dc.Name), 256), f("vendor_id", unsafe.Offsetof(dc.VendorID), 256, 4, 4),
			f("device_id", unsafe.Offsetof(dc.DeviceID), 260, 4, 4), f("features", unsafe.Offsetof(dc.Features), 264, 8, 8),
			f("vq_num", unsafe.Offsetof(dc.VQNum), 272, 4, 4), f("vq_align", unsafe.Offsetof(dc.VQAlign), 276, 4, 4),
			f("reserved", unsafe.Offsetof(dc.Reserved), 280, unsafe.Sizeof(dc.Reserved), 52), f("config_size", unsafe.Offsetof(dc.ConfigSize), 332, 4, 4)}},
		{"vduse_iotlb_entry", unsafe.Sizeof(ie), 32, []field{
			f("offset", unsafe.Offsetof(ie.Offset), 0, 8, 8), f("start", unsafe.Offsetof(ie.Start), 8, 8, 8), f("last", unsafe.Offsetof(ie.Last), 16, 8, 8),
			f("perm", unsafe.Offsetof(ie.Perm), 24, unsafe.Sizeof(ie.Perm), 1)}},
		{"vduse_config_data", unsafe.Sizeof(cd), 8, []field{f("offset", unsafe.Offsetof(cd.Offset), 0, 4, 4), f("length", unsafe.Offsetof(cd.Length), 4, 4, 4)}},
		{"vduse_vq_config", unsafe.Sizeof(qc), 32, []field{
			f("index", unsafe.Offsetof(qc.Index), 0, 4, 4), f("max_size", unsafe.Offsetof(qc.MaxSize), 4, unsafe.Sizeof(qc.MaxSize), 2),
			f("reserved", unsafe.Offsetof(qc.Reserved), 6, unsafe.Sizeof(qc.Reserved), 26)}},
		{"vduse_vq_state_packed", unsafe.Sizeof(VduseVQStatePacked{}), 8, nil},
		{"vduse_vq_info", unsafe.Sizeof(qi), 48, []field{
			f("index", unsafe.Offsetof(qi.Index), 0, 4, 4), f("num", unsafe.Offsetof(qi.Num), 4, 4, 4), f("desc_addr", unsafe.Offsetof(qi.DescAddr), 8, 8, 8),
			f("driver_addr", unsafe.Offsetof(qi.DriverAddr), 16, 8, 8), f("device_addr", unsafe.Offsetof(qi.DeviceAddr), 24, 8, 8),
			f("split/packed", unsafe.Offsetof(qi.State), 32, unsafe.Sizeof(qi.State), 8), f("ready", unsafe.Offsetof(qi.Ready), 40, unsafe.Sizeof(qi.Ready), 1)}},
		{"vduse_vq_eventfd", unsafe.Sizeof(qe), 8, []field{f("index", unsafe.Offsetof(qe.Index), 0, 4, 4), f("fd", unsafe.Offsetof(qe.FD), 4, 4, 4)}},
		{"vduse_iova_umem", unsafe.Sizeof(um), 48, []field{
			f("uaddr", unsafe.Offsetof(um.UAddr), 0, 8, 8), f("iova", unsafe.Offsetof(um.IOVA), 8, 8, 8), f("size", unsafe.Offsetof(um.Size), 16, 8, 8),
			f("reserved", unsafe.Offsetof(um.Reserved), 24, unsafe.Sizeof(um.Reserved), 24)}},
		{"vduse_iova_info", unsafe.Sizeof(ii), 48, []field{
			f("start", unsafe.Offsetof(ii.Start), 0, 8, 8), f("last", unsafe.Offsetof(ii.Last), 8, 8, 8), f("capability", unsafe.Offsetof(ii.Capability), 16, 8, 8),
			f("reserved", unsafe.Offsetof(ii.Reserved), 24, unsafe.Sizeof(ii.Reserved), 24)}},
		{"vduse_vq_state", unsafe.Sizeof(qs), 12, []field{f("index", unsafe.Offsetof(qs.Index), 0, 4, 4), f("split/packed", unsafe.Offsetof(qs.State), 4, unsafe.Sizeof(qs.State), 8)}},
		{"vduse_iova_range", unsafe.Sizeof(VduseIOVARange{}), 16, nil},
		{"vduse_dev_request", unsafe.Sizeof(rq), 152, []field{
			f("type", unsafe.Offsetof(rq.Type), 0, 4, 4), f("request_id", unsafe.Offsetof(rq.RequestID), 4, 4, 4),
			f("reserved", unsafe.Offsetof(rq.Reserved), 8, unsafe.Sizeof(rq.Reserved), 16), f("union", unsafe.Offsetof(rq.Payload), 24, unsafe.Sizeof(rq.Payload), 128)}},
		{"vduse_dev_response", unsafe.Sizeof(rs), 152, []field{
			f("request_id", unsafe.Offsetof(rs.RequestID), 0, 4, 4), f("result", unsafe.Offsetof(rs.Result), 4, 4, 4),
			f("reserved", unsafe.Offsetof(rs.Reserved), 8, unsafe.Sizeof(rs.Reserved), 16), f("union", unsafe.Offsetof(rs.Payload), 24, unsafe.Sizeof(rs.Payload), 128)}},
		{"ifreq", unsafe.Sizeof(ifr), 40, []field{f("ifr_name", unsafe.Offsetof(ifr.Name), 0, unsafe.Sizeof(ifr.Name), 16), f("ifr_flags", unsafe.Offsetof(ifr.Flags), 16, unsafe.Sizeof(ifr.Flags), 2)}},
		{"tun_pi", unsafe.Sizeof(pi), 4, []field{f("flags", unsafe.Offsetof(pi.Flags), 0, 2, 2), f("proto", unsafe.Offsetof(pi.Proto), 2, 2, 2)}},
		{"tun_filter", unsafe.Sizeof(TunFilter{}), 4, nil},
		{"sock_fprog", unsafe.Sizeof(fp), 16, []field{f("len", unsafe.Offsetof(fp.Len), 0, 2, 2), f("filter", unsafe.Offsetof(fp.Filter), 8, 8, 8)}},
		{"virtio_net_hdr", unsafe.Sizeof(h), 10, []field{
			f("flags", unsafe.Offsetof(h.Flags), 0, 1, 1), f("gso_type", unsafe.Offsetof(h.GSOType), 1, 1, 1), f("hdr_len", unsafe.Offsetof(h.HdrLen), 2, 2, 2),
			f("gso_size", unsafe.Offsetof(h.GSOSize), 4, 2, 2), f("csum_start", unsafe.Offsetof(h.CsumStart), 6, 2, 2), f("csum_offset", unsafe.Offsetof(h.CsumOffset), 8, 2, 2)}},
		{"virtio_net_hdr_v1", unsafe.Sizeof(h1), 12, []field{f("num_buffers", unsafe.Offsetof(h1.NumBuffers), 10, unsafe.Sizeof(h1.NumBuffers), 2)}},
		{"virtio_net_hdr_v1_hash", unsafe.Sizeof(hh), 20, []field{
			f("hdr", unsafe.Offsetof(hh.Hdr), 0, unsafe.Sizeof(hh.Hdr), 12), f("hash_value", unsafe.Offsetof(hh.HashValue), 12, 4, 4),
			f("hash_report", unsafe.Offsetof(hh.HashReport), 16, 2, 2), f("padding", unsafe.Offsetof(hh.Padding), 18, 2, 2)}},
		{"virtio_net_config", unsafe.Sizeof(nc), 24, []field{
			f("mac", unsafe.Offsetof(nc.MAC), 0, unsafe.Sizeof(nc.MAC), 6), f("status", unsafe.Offsetof(nc.Status), 6, unsafe.Sizeof(nc.Status), 2),
			f("max_virtqueue_pairs", unsafe.Offsetof(nc.MaxVirtqueuePairs), 8, 2, 2), f("mtu", unsafe.Offsetof(nc.MTU), 10, unsafe.Sizeof(nc.MTU), 2),
			f("speed", unsafe.Offsetof(nc.Speed), 12, unsafe.Sizeof(nc.Speed), 4), f("duplex", unsafe.Offsetof(nc.Duplex), 16, 1, 1),
			f("rss_max_key_size", unsafe.Offsetof(nc.RSSMaxKeySize), 17, 1, 1),
			f("rss_max_indirection_table_length", unsafe.Offsetof(nc.RSSMaxIndirectionTabLen), 18, 2, 2),
			f("supported_hash_types", unsafe.Offsetof(nc.SupportedHashTypes), 20, unsafe.Sizeof(nc.SupportedHashTypes), 4)}},
		{"vring_desc", unsafe.Sizeof(desc), 16, []field{
			f("addr", unsafe.Offsetof(desc.Addr), 0, 8, 8), f("len", unsafe.Offsetof(desc.Len), 8, 4, 4), f("flags", unsafe.Offsetof(desc.Flags), 12, 2, 2),
			f("next", unsafe.Offsetof(desc.Next), 14, 2, 2)}},
		{"vring_used_elem", unsafe.Sizeof(VringUsedElem{}), 8, nil},
	}
	for _, c := range cases {
		if c.gotSize != c.want {
			t.Errorf("sizeof(struct %s) = %d, kernel has %d", c.name, c.gotSize, c.want)
		}
		for _, fl := range c.fields {
			if fl.gotOff != fl.want {
				t.Errorf("offsetof(struct %s, %s) = %d, kernel has %d", c.name, fl.name, fl.gotOff, fl.want)
			}
			if fl.gotSize != fl.wantSize {
				t.Errorf("sizeof(struct %s.%s) = %d, kernel has %d", c.name, fl.name, fl.gotSize, fl.wantSize)
			}
		}
	}
}
