package vufront

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/test/vhostrig/hostside"
	"github.com/netctl/netctl/vhostnet/guest"
	"github.com/netctl/netctl/vhostuser"
	"github.com/netctl/netctl/virtio"
)

// bridgeRig is a vhost-user bridge (package vhostuser, in this process)
// serving a socket onto kernel vhost-net over a multiqueue tap, with an
// AF_PACKET socket on the tap as the host side. The VM's own network
// namespace holds the tap: the bridge's goroutines run on any thread.
type bridgeRig struct {
	t       *testing.T
	tap     *macvtap.Tap
	host    *hostside.Side
	socket  string
	queues  int
	offl    macvtap.Offloads
	bridge  *vhostuser.Bridge
	stopped chan error
	cancel  context.CancelFunc
}

// wantFeatures is what the frontend acknowledges where offered: VERSION_1,
// MRG_RXBUF, checksum and TSO both ways, and MQ.
const wantFeatures = virtio.Version1 | virtio.NetMrgRxbuf | virtio.NetCsum | virtio.NetGuestCsum |
	virtio.NetHostTSO4 | virtio.NetGuestTSO4 | virtio.NetMQ

func newBridgeRig(t *testing.T, queues int) *bridgeRig {
	t.Helper()
	r := &bridgeRig{t: t, queues: queues, socket: filepath.Join(t.TempDir(), "vu.sock")}
	var err error
	r.tap, r.host = hostside.NewTap(t, macvtap.TapConfig{Name: "vu%d", VnetHdr: true, VnetHdrSize: 12, Queues: queues})
	if r.offl, err = tapOffloads(); err != nil {
		t.Fatal(err)
	}
	r.start()
	t.Cleanup(r.stop)
	return r
}

// start makes a Bridge on the rig's socket and tap and serves it.
func (r *bridgeRig) start() {
	r.t.Helper()
	b, err := vhostuser.NewBridge(vhostuser.Config{Socket: r.socket, Backend: r.tap, Queues: r.queues, Offloads: r.offl})
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.bridge, r.cancel, r.stopped = b, cancel, make(chan error, 1)
	go func() { r.stopped <- b.Serve(ctx) }()
}

// stop ends Serve and closes the Bridge (as a bridge process that exits
// would). Idempotent.
func (r *bridgeRig) stop() {
	if r.bridge == nil {
		return
	}
	r.cancel()
	if err := <-r.stopped; err != nil {
		r.t.Errorf("bridge Serve: %v", err)
	}
	if err := r.bridge.Close(); err != nil {
		r.t.Errorf("bridge Close: %v", err)
	}
	r.bridge = nil
}

// connect dials the bridge and sets up n queue pairs.
func (r *bridgeRig) connect(n int, cfg Config) *Frontend {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	f, err := Dial(ctx, r.socket, cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { f.Close() })
	if _, err := f.Negotiate(wantFeatures, virtio.Version1|virtio.NetMrgRxbuf, WantProtocol); err != nil {
		r.t.Fatal(err)
	}
	if err := f.SetupQueues(n); err != nil {
		r.t.Fatal(err)
	}
	return f
}

// guestToHost sends a UDP frame on pair q and checks it arrives byte for
// byte; seq makes it unique.
func (r *bridgeRig) guestToHost(f *Frontend, q, seq int) {
	r.t.Helper()
	want := guest.IPv4Frame(17, guest.GuestIP, guest.HostIP, uint16(4000+q), uint16(5000+seq), guest.Pattern(300+seq, byte(seq)), false)
	if err := f.Send(q, guest.NetHdr{}, want); err != nil {
		r.t.Fatal(err)
	}
	if got := r.host.Recv(5*time.Second, hostside.From(guest.GuestIP)); !bytes.Equal(got, want) {
		r.t.Fatalf("pair %d, frame %d: the host got %d bytes, want the %d bytes the guest sent", q, seq, len(got), len(want))
	}
}

// hostToGuest sends a UDP frame from the host and checks it arrives on
// pair q byte for byte.
func (r *bridgeRig) hostToGuest(f *Frontend, q, seq int) {
	r.t.Helper()
	want := guest.IPv4Frame(17, guest.HostIP, guest.GuestIP, 5000, uint16(4000+seq), guest.Pattern(400+seq, byte(seq)), false)
	r.host.Send(want)
	h, got, err := f.Recv(q, 5*time.Second)
	if err != nil {
		r.t.Fatalf("host to guest, frame %d: %v", seq, err)
	}
	if !bytes.Equal(got, want) {
		r.t.Fatalf("host to guest, frame %d: the guest got %d bytes, want the %d bytes sent", seq, len(got), len(want))
	}
	if h.GSOType != 0 {
		r.t.Errorf("header %+v on a plain frame", h)
	}
}

// resources counts this process's open fds and its mappings of the
// frontend's memfds (the bridge maps each region once more): what a
// bridge that leaks a session would keep.
func resources(t *testing.T) (fds, maps int) {
	t.Helper()
	fds = testenv.OpenFDs(t)
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	maps = strings.Count(string(b), "/memfd:netctl-guest")
	return fds, maps
}

// waitResources waits until resources reports want.
func waitResources(t *testing.T, wantFDs, wantMaps int) {
	t.Helper()
	var fds, maps int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if fds, maps = resources(t); fds == wantFDs && maps == wantMaps {
			return
		}
	}
	t.Errorf("%d fds and %d memfd mappings, want %d and %d (the bridge kept a session's)", fds, maps, wantFDs, wantMaps)
}

// tapOffloads are the offloads this kernel's tap takes, probed once.
var tapOffloads = sync.OnceValues(func() (macvtap.Offloads, error) { return macvtap.ProbeOffloads(macvtap.KindTap) })

// hostToAny sends a UDP frame from the host and checks it arrives byte for
// byte on one of the pairs (tun picks the queue by the flow's hash).
func (r *bridgeRig) hostToAny(f *Frontend, seq int) {
	r.t.Helper()
	want := guest.IPv4Frame(17, guest.HostIP, guest.GuestIP, 5000, uint16(4000+seq), guest.Pattern(400+seq, byte(seq)), false)
	r.host.Send(want)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		for q, p := range f.Pairs() {
			if p.RX.DeviceUsedIdx() == p.RX.LastUsed() {
				continue
			}
			_, got, err := f.Recv(q, time.Second)
			if err != nil {
				r.t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				r.t.Fatalf("host to guest, frame %d: pair %d got %d bytes, want the %d bytes sent", seq, q, len(got), len(want))
			}
			return
		}
	}
	r.t.Fatalf("host to guest, frame %d: no pair received it", seq)
}
