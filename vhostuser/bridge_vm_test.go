package vhostuser

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/test/vhostrig/hostside"
	"github.com/netctl/netctl/vhostnet/guest"
	"github.com/netctl/netctl/virtio"
)

// vmBridge serves a bridge on real /dev/vhost-net over a 2-queue tap.
func vmBridge(t *testing.T, queues int) (*rig, *macvtap.Tap) {
	t.Helper()
	tap, err := macvtap.CreateTap(macvtap.TapConfig{Name: "vub%d", VnetHdr: true, VnetHdrSize: 12, Queues: queues})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tap.Close() })
	offl, err := macvtap.ProbeOffloads(macvtap.KindTap)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{path: filepath.Join(socketDir(t), "vu.sock")}
	r.b, err = NewBridge(Config{Socket: r.path, Backend: tap, Queues: queues, Offloads: offl, MaxMemSlots: 4})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.b.Serve(ctx) }()
	stopped := false
	r.stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		return errors.Join(<-done, r.b.Close())
	}
	t.Cleanup(func() {
		if err := r.stop(); err != nil {
			t.Error(err)
		}
	})
	return r, tap
}

// TestVMBridge drives the bridge on the VM's real vhost-net: frames both
// ways on two queue pairs, a stopped and restarted ring that keeps its
// position, reconnecting, every bad front-end, and a bridge that dropped
// its privileges. vhost-net is in both VM kernels (6.12 and 6.1).
func TestVMBridge(t *testing.T) {
	testenv.VM(t)
	testenv.Host(t)
	r, tap := vmBridge(t, 2)
	h := newHostSide(t, tap.Name())

	t.Run("frames both ways, reconnect", func(t *testing.T) {
		f := dialDataPath(t, r.path, 2)
		framesBothWays(t, f, h, 1)
		if st := r.b.Status(); st.Features == "" || len(st.Rings) != 4 || !st.Rings[3].Attached {
			t.Errorf("status %+v", st)
		}
		f.c.Close()
		r.waitIdle(t, 1)
		g := dialDataPath(t, r.path, 2)
		framesBothWays(t, g, h, 2)
		g.c.Close()
		r.waitIdle(t, 2)
	})

	t.Run("GET_VRING_BASE stops, SET_VRING_BASE resumes", func(t *testing.T) {
		f := dialDataPath(t, r.path, 1)
		framesBothWays(t, f, h, 3)
		framesBothWays(t, f, h, 4)
		tx := f.tx[0]
		rep := f.get(GetVringBase, VringState{Index: 1})
		if got := decodeVringState(rep); got.Num != uint32(tx.AvailIdx()) {
			t.Fatalf("GET_VRING_BASE of TX: %d, the driver made %d buffers available (all used)", got.Num, tx.AvailIdx())
		}
		// Stopped: a frame pushed now stays in the ring.
		want := guest.IPv4Frame(17, guest.GuestIP, guest.HostIP, 4444, 5000, guest.Pattern(600, 9), false)
		if err := tx.PushOut(append(guest.NetHdr{}.Append(nil, 12), want...)); err != nil {
			t.Fatal(err)
		}
		if err := tx.Notify(); err != nil {
			t.Fatal(err)
		}
		base := decodeVringState(rep).Num
		// Restart where it stopped: the pending frame goes out.
		f.startRing(1, tx, uint16(base))
		if h.Recv(time.Minute, hostside.Is(want)) == nil {
			t.Fatal("the frame pushed while the ring was stopped did not go out after the restart")
		}
		f.c.Close()
		r.waitIdle(t, 3)
	})

	t.Run("a refused SET_VRING_NUM leaves the ring running", func(t *testing.T) {
		// TX's descriptor table has no room for 32768 entries in this
		// memory table: the bridge refuses the size before vhost-net
		// hears of it, and the running ring keeps moving frames.
		sessions := r.b.Status().Sessions
		f := dialDataPathOpts(t, r.path, 1, dpOpts{tight: true})
		framesBothWays(t, f, h, 20)
		if err := f.send(SetVringNum, VringState{Index: 1, Num: 32768}, FlagNeedReply); err == nil {
			t.Fatal("SET_VRING_NUM 32768 on a ring whose descriptor table cannot hold it was accepted")
		}
		if st := r.b.Status(); st.Rings[1].Num != int(f.tx[0].Num()) || !st.Rings[1].Attached {
			t.Errorf("TX ring after the refusal: %+v, want %d entries and attached", st.Rings[1], f.tx[0].Num())
		}
		framesBothWays(t, f, h, 21)
		f.c.Close()
		r.waitIdle(t, sessions+1)
	})

	t.Run("dirty log", func(t *testing.T) {
		f := dialDataPathLog(t, r.path, 1, true)
		framesBothWays(t, f, h, 5) // running before migration starts
		// Migration starts: the log, its eventfd, then LOG_ALL and the rings'
		// used rings logged, as QEMU does (vhost_migration_log).
		pages := uint64(len(f.mem.Buf)) / 4096
		logSize := (pages/8 + 4095) &^ 4095
		logFD := memfd(t, "netctl-log", int64(logSize))
		logBuf, err := unix.Mmap(logFD, 0, int(logSize), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Munmap(logBuf)
		if err := WriteMessage(f.c, NewMessage(SetLogBase, Log{MmapSize: logSize}, logFD)); err != nil {
			t.Fatal(err)
		}
		if rep, err := f.read(SetLogBase); err != nil || decodeU64(rep.Payload) != 0 {
			t.Fatalf("SET_LOG_BASE: %v %v", rep, err)
		}
		f.must(SetLogFD, nil, eventfd(t))
		f.must(SetFeatures, U64(virtio.Version1|virtio.LogAll|virtio.Features(FeatureProtocolFeatures)))
		f.logRings()
		bit := func(gpa uint64) bool { return logBuf[gpa/4096/8]&(1<<(gpa/4096%8)) != 0 }
		for _, b := range logBuf {
			if b != 0 {
				t.Fatal("log bits set before vhost wrote anything under LOG_ALL")
			}
		}
		framesBothWays(t, f, h, 6)
		rx := f.rx[0]
		if !bit(rx.UsedGPA()) {
			t.Errorf("the RX used ring's page (gpa %#x) is not marked dirty", rx.UsedGPA())
		}
		dirty := 0
		for i := 0; i < int(rx.Num()); i++ {
			if bit(rx.BufGPA(i)) {
				dirty++
			}
		}
		if dirty == 0 {
			t.Error("no RX buffer page is marked dirty after vhost wrote a frame into one")
		}
		if st := r.b.Status(); !st.DirtyLog {
			t.Errorf("status %+v: want the dirty log", st)
		}
		f.c.Close()
		r.waitIdle(t, 5)
	})

	t.Run("SEND_RARP", func(t *testing.T) {
		f := dialFrontend(t, r.path)
		f.get(GetFeatures, nil)
		f.must(SetProtocolFeatures, U64(ProtocolReplyAck|ProtocolRARP))
		f.proto = ProtocolReplyAck | ProtocolRARP
		f.must(SetFeatures, U64(virtio.Version1|virtio.Features(FeatureProtocolFeatures)))
		mac := []byte{0x52, 0x54, 0x00, 0xab, 0xcd, 0xef}
		var v [8]byte
		copy(v[:], mac)
		f.must(SendRARP, U64(binary.LittleEndian.Uint64(v[:])))
		if h.Recv(time.Minute, hostside.Is(rarpFrame(mac))) == nil {
			t.Fatal("the host did not see the RARP announcement on the tap")
		}
		f.c.Close()
		r.waitIdle(t, 6)
	})

	t.Run("bad frontends", func(t *testing.T) { runBadFrontends(t, r, 2) })

	t.Run("bridge restart", func(t *testing.T) {
		f := dialDataPath(t, r.path, 2)
		framesBothWays(t, f, h, 10)
		if err := r.stop(); err != nil { // the bridge goes away under a running front-end
			t.Fatal(err)
		}
		f.expectClosed()
		r2 := startBridgeWith(t, Config{Socket: r.path, Backend: tap, Queues: 2, MaxMemSlots: 4})
		g := dialDataPath(t, r2.path, 2) // the front-end reconnects: a fresh handshake
		framesBothWays(t, g, h, 11)
		g.c.Close()
		r2.waitIdle(t, 1)
	})

	t.Run("privileges dropped", func(t *testing.T) {
		out, err := helper(t, "vhost-net")
		if err != nil {
			t.Fatalf("the helper failed: %v\n%s", err, out)
		}
		t.Logf("helper:\n%s", out)
	})
}

// helper runs TestBridgeHelperProcess in a child process as root; its
// bridge drops to nobody after opening the devices and must then still
// serve front-ends.
func helper(t *testing.T, mode string) (string, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestBridgeHelperProcess$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "NETCTL_VU_HELPER="+mode)
	out, err := cmd.CombinedOutput()
	if err == nil && !strings.Contains(string(out), "--- PASS: TestBridgeHelperProcess") {
		err = errors.New("the helper did not run")
	}
	return string(out), err
}
