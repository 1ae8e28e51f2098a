package vhostuser

import (
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/macvtap"
)

// FuzzSession feeds a session any sequence of messages (each with its
// fds: memfds of 1 MiB) on a fake vhost-net: no panic, and once the
// session stops, no mapping of the front-end's memory and no eventfd
// reference is left. Seeds: QEMU's handshake and the bad front-ends'
// shapes.
func FuzzSession(f *testing.F) {
	var seq []byte
	for _, m := range qemuHandshake() {
		seq = append(seq, encodeSeed(m)...)
	}
	f.Add(seq)
	f.Add(encodeSeed(NewMessage(SetMemTable, MemoryTable{Regions: []MemRegion{{0, 1 << 20, testUaddr, 0}}}, 0)))
	k := newFakeKernel()
	tap := newFakeTap(2)
	defer tap.Close()
	dir, err := os.MkdirTemp("", "vufz")
	if err != nil {
		f.Fatal(err)
	}
	defer os.RemoveAll(dir)
	b, err := NewBridge(Config{Socket: filepath.Join(dir, "s"), Backend: tap, Queues: 2, OpenVhost: k.open, MaxMemSlots: 8,
		Offloads: macvtap.OffloadCSUM | macvtap.OffloadTSO4})
	if err != nil {
		f.Fatal(err)
	}
	defer b.Close()
	f.Fuzz(func(t *testing.T, data []byte) {
		a, c := socketPair(t)
		go io.Copy(io.Discard, a) // the replies
		s := newSession(b, c, 0)
		if err := s.start(); err != nil {
			t.Fatal(err)
		}
		for len(data) >= 1+HeaderSize {
			nfds := int(data[0]) % (MaxFDs + 1)
			size := int(binary.LittleEndian.Uint32(data[9:])) % (MaxPayload + 1)
			data = data[1:]
			end := min(len(data), HeaderSize+size)
			m := &Message{Header: Header{Request: Request(binary.LittleEndian.Uint32(data[0:])),
				Flags: Flags(binary.LittleEndian.Uint32(data[4:])), Size: uint32(end - HeaderSize)},
				Payload: append([]byte(nil), data[HeaderSize:end]...)}
			data = data[end:]
			for i := 0; i < nfds; i++ {
				fd, err := unix.MemfdCreate("vu-fuzz", unix.MFD_CLOEXEC)
				if err != nil {
					t.Fatal(err)
				}
				unix.Ftruncate(fd, 1<<20)
				m.FDs = append(m.FDs, fd)
			}
			if err := s.one(m); err != nil {
				break // the bridge would close the connection here
			}
		}
		if err := s.stop(); err != nil {
			t.Fatal(err)
		}
		maps, _ := os.ReadFile("/proc/self/maps")
		if strings.Contains(string(maps), "memfd:vu-fuzz") {
			t.Fatal("a mapping of the front-end's memory outlived the session")
		}
		for i := 0; i < 2; i++ {
			if d := k.dev(i); d.owner || d.table != nil || d.vr[0].kick != -1 || d.vr[1].call != -1 || d.logFD != -1 {
				t.Fatalf("device %d not reset after the session", i)
			}
		}
	})
}
