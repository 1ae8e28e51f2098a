package diagnose

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/netctl/netctl/internal/fuzzalloc"
	"github.com/netctl/netctl/virtio"
)

// FuzzDecode: Load's parser on any bytes. Seeds are real: a snapshot that
// netctl diagnose --save wrote against QEMU 7.2 and a 6.12 guest, QEMU
// 7.2's x-query-virtio-status reply bare and as virsh prints it, and
// QEMU's error reply. No panic, allocation bounded by the input's size,
// and a snapshot that decodes encodes, decodes again and encodes to the
// same bytes and explains the same way.
func FuzzDecode(f *testing.F) {
	st := readFile(f, "testdata/qemu-7.2-status.json")
	f.Add(readFile(f, "testdata/snapshot-qemu-7.2-guest-6.12.json"))
	f.Add(st)
	f.Add([]byte(`{"return":` + string(st) + `,"id":"libvirt-42"}`))
	f.Add([]byte(`{"id":"libvirt-7","error":{"class":"GenericError","desc":"Path '/machine/peripheral/net0/virtio-backend' is not a VirtIODevice"}}`))
	f.Add([]byte(`{"format":"netctl-diagnose/1","virtio_status":{"name":"virtio-net","device-id":1},"host":{"tap":{"available":true,"offloads":["csum"]}}}`))
	// vhost=on, as QMP shows it (real-vmm-recipes.md part 2), with the NIC
	// type's defaults and its command line.
	f.Add([]byte(`{"format":"netctl-diagnose/1","driver":"virtio-net-pci","prop_defaults":{"queue_reset":true,"event_idx":true},` +
		`"cmdline_props":{"guest_tso4":"off"},"props":{"queue_reset":false},"netdev":{"id":"n0","type":"tap"},` +
		`"virtio_status":{"name":"virtio-net","device-id":1,"vhost-started":true,"vhost-dev":{"acked-features":{"dev-features":["VIRTIO_NET_F_MRG_RXBUF"],` +
		`"transports":["VIRTIO_RING_F_EVENT_IDX","VIRTIO_RING_F_INDIRECT_DESC","VIRTIO_F_VERSION_1"],"unknown-dev-features":1099511627776},` +
		`"features":{"dev-features":["VHOST_F_LOG_ALL","VIRTIO_NET_F_MRG_RXBUF"],"transports":["EVENT_IDX","INDIRECT_DESC","IOMMU_PLATFORM","VERSION_1","ANY_LAYOUT","NOTIFY_ON_EMPTY"]}}}}`))
	// Real vhost=on samples from the nested guest (TestVMDiagnoseNested):
	// a full snapshot on 6.1 and a bare reply with vnet_hdr=off.
	f.Add(readFile(f, "testdata/nested-6.1/nic1-full-snapshot.json"))
	f.Add(readFile(f, "testdata/nested-6.1/qmp-x-query-virtio-status-nic3.json"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var s *Snapshot
		var err error
		fuzzalloc.Check(t, len(b), func() { s, err = Decode(b) })
		if err != nil {
			if s != nil {
				t.Fatalf("Decode returned a snapshot and %v", err)
			}
			return
		}
		var r1 *Report
		fuzzalloc.Check(t, len(b), func() { r1, err = Explain(s) })
		if err != nil {
			t.Fatalf("Decode took it but Explain refuses: %v", err)
		}
		if len(r1.Features) > 64 {
			t.Fatalf("%d rows", len(r1.Features))
		}
		e1, err := s.Encode()
		if err != nil {
			t.Fatal(err)
		}
		s2, err := Decode(e1)
		if err != nil {
			t.Fatalf("Decode(Encode(Decode(b))): %v\n%s", err, e1)
		}
		e2, err := s2.Encode()
		if err != nil || !bytes.Equal(e1, e2) {
			t.Fatalf("encode -> decode -> encode differs: %v\n%s\n%s", err, e1, e2)
		}
		r2, err := Explain(s2)
		j1, _ := json.Marshal(r1)
		j2, _ := json.Marshal(r2)
		if err != nil || !bytes.Equal(j1, j2) {
			t.Fatalf("the re-decoded snapshot explains differently: %v\n%s\n%s", err, j1, j2)
		}
	})
}

// FuzzQEMUFeatureNames: QEMU's VirtioDeviceFeatures (the name lists of
// x-query-virtio-status) on any bytes; seeds are the lists a real QEMU
// 7.2 printed. No panic; every name is either placed in the word or
// returned as unknown; and the word written back as QEMU names reads as
// the same word.
func FuzzQEMUFeatureNames(f *testing.F) {
	var st map[string]json.RawMessage
	if err := json.Unmarshal(readFile(f, "testdata/qemu-7.2-status.json"), &st); err != nil {
		f.Fatal(err)
	}
	for _, k := range []string{"host-features", "guest-features", "backend-features"} {
		f.Add([]byte(st[k]))
	}
	f.Add([]byte(`{"dev-features":["VIRTIO_NET_F_GUEST_USO4: Driver can receive USOv6 packets","VIRTIO_NET_F_GUEST_UDP_TUNNEL_GSO: x"],"unknown-dev-features2":3}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var q qemuFeatures
		if err := json.Unmarshal(b, &q); err != nil || len(q.Dev)+len(q.Transports) > maxFeatureNames {
			return
		}
		var w virtio.Features
		var unknown []string
		fuzzalloc.Check(t, len(b), func() { w, unknown = q.word() })
		if len(unknown) > len(q.Dev)+len(q.Transports) {
			t.Fatalf("%d unknown names out of %d", len(unknown), len(q.Dev)+len(q.Transports))
		}
		// Back to QEMU's form: the named bits by name, the rest as a word.
		var back qemuFeatures
		for _, bit := range w.Bits() {
			if name := virtio.BitName(bit); !strings.HasPrefix(name, "bit ") {
				back.Dev = append(back.Dev, "VIRTIO_NET_F_"+name+": description")
			} else {
				back.Unknown |= uint64(virtio.Bit(bit))
			}
		}
		again, u := back.word()
		if again != w || len(u) != 0 {
			t.Fatalf("%#x -> %v -> %#x, unknown %v", uint64(w), back, uint64(again), u)
		}
	})
}

// FuzzInfoNetwork: QEMU's "info network" text and a netdev id, any bytes;
// seeded with what QEMU 7.2 printed for TestHostDiagnoseRealQEMU. No
// panic, the bounds hold, and the netdev written back as a line parses
// to the same netdev.
func FuzzInfoNetwork(f *testing.F) {
	real := string(readFile(f, "testdata/info-network-qemu-7.2.txt"))
	f.Add(real, "n0")
	f.Add(real, "nic0")
	f.Add(real, "n1")
	f.Add("hub 0\r\n \\ hub0port1: user.0: index=0,type=user,net=10.0.2.0,restrict=off\r\n \\ hub0port0: e1000.0: index=0,type=nic,model=e1000\r\n", "hub0port1")
	f.Add("net0: index=0,type=nic,model=virtio-net-pci,macaddr=52:54:00:aa:bb:cc\r\n \\ hostnet0: index=0,type=tap,fds=27:29,vhostfds=30:31\r\n", "hostnet0")
	f.Fuzz(func(t *testing.T, out, id string) {
		var nd Netdev
		var err error
		fuzzalloc.Check(t, len(out)+len(id), func() { nd, err = ParseInfoNetwork(out, id) })
		if err != nil {
			return
		}
		if nd.ID != id || len(nd.Options) > maxNetdevOptions {
			t.Fatalf("netdev %+v for id %q", nd, id)
		}
		if _, ok := nd.Options["index"]; ok {
			t.Fatal("index kept as an option")
		}
		if _, ok := nd.Options["type"]; ok {
			t.Fatal("type kept as an option")
		}
		line := " \\ " + id + ": index=0,type=" + nd.Type
		for _, k := range slices.Sorted(maps.Keys(nd.Options)) {
			line += "," + k + "=" + nd.Options[k]
		}
		again, err := ParseInfoNetwork(line+"\r\n", id)
		if err != nil || again.Type != nd.Type || !maps.Equal(again.Options, nd.Options) {
			t.Fatalf("%q -> %+v -> %q -> %+v, %v", out, nd, line, again, err)
		}
	})
}
