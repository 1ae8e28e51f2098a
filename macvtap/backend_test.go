package macvtap

import (
	"errors"
	"fmt"
	"testing"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/virtio"
)

// fakeBackend keeps a header size and offloads, and refuses what it is
// told to, as a kernel would: a refused call changes nothing.
type fakeBackend struct {
	hdr       int
	offloads  Offloads
	refuseHdr map[int]bool
	refuseOff func(Offloads) error
}

func (f *fakeBackend) Kind() Kind                { return KindTap }
func (f *fakeBackend) Name() string              { return "fake0" }
func (f *fakeBackend) Lower() string             { return "" }
func (f *fakeBackend) Queues() int               { return 1 }
func (f *fakeBackend) QueueFD(int) int           { return -1 }
func (f *fakeBackend) VnetHdrSize() (int, error) { return f.hdr, nil }
func (f *fakeBackend) Offloads() Offloads        { return f.offloads }
func (f *fakeBackend) Close() error              { return nil }
func (f *fakeBackend) SetVnetHdrSize(n int) error {
	if f.refuseHdr[n] {
		return fmt.Errorf("header size %d: %w", n, ErrNotSupported)
	}
	f.hdr = n
	return nil
}
func (f *fakeBackend) SetOffloads(o Offloads) error {
	if f.refuseOff != nil {
		if err := f.refuseOff(o); err != nil {
			return err
		}
	}
	f.offloads = o
	return nil
}

func TestVnetHdrSizeFor(t *testing.T) {
	for _, c := range []struct {
		acked virtio.Features
		want  int
	}{
		{0, 10},
		{virtio.NetMrgRxbuf, 12},
		{virtio.Version1, 12},
		{virtio.Version1 | virtio.NetHashReport, 20},
		{virtio.Version1 | virtio.NetMrgRxbuf | virtio.NetHashReport, 20},
	} {
		if got := VnetHdrSizeFor(c.acked); got != c.want {
			t.Errorf("%v: %d, want %d", c.acked, got, c.want)
		}
	}
}

// TestApplyGuestFeaturesIsOneStep: whichever step is refused, the header
// size and offloads are as they were before the call.
func TestApplyGuestFeaturesIsOneStep(t *testing.T) {
	const before = OffloadCSUM
	acked := virtio.Version1 | virtio.NetGuestCsum | virtio.NetGuestTSO4 | virtio.NetGuestUSO4 | virtio.NetGuestUSO6
	refuseAll := func(o Offloads) error { return fmt.Errorf("offloads %v: %w", o, ErrInvalid) }
	refuseUSO := func(o Offloads) error {
		if o&(OffloadUSO4|OffloadUSO6) != 0 {
			return fmt.Errorf("offloads %v: Linux 6.2: %w", o, ErrNotSupported)
		}
		return nil
	}
	refuseUSOThenAll := func(o Offloads) error {
		if o&(OffloadUSO4|OffloadUSO6) != 0 {
			return fmt.Errorf("offloads %v: %w", o, ErrNotSupported)
		}
		return fmt.Errorf("offloads %v: gone: %w", o, ErrClosed)
	}
	for _, c := range []struct {
		name      string
		acked     virtio.Features
		refuseHdr map[int]bool
		refuseOff func(Offloads) error
		wantErr   error
		wantHdr   int
		wantOff   Offloads
	}{
		{"everything taken", acked, nil, nil, nil, 12, OffloadCSUM | OffloadTSO4 | OffloadUSO4 | OffloadUSO6},
		{"USO refused, the rest taken", acked, nil, refuseUSO, nil, 12, OffloadCSUM | OffloadTSO4},
		{"offloads refused", acked, nil, refuseAll, ErrInvalid, 10, before},
		{"USO refused, then the rest too", acked, nil, refuseUSOThenAll, ErrClosed, 10, before},
		{"header size refused", acked, map[int]bool{12: true}, nil, ErrNotSupported, 10, before},
		{"hash report's 20 bytes", acked | virtio.NetHashReport, nil, nil, nil, 20, OffloadCSUM | OffloadTSO4 | OffloadUSO4 | OffloadUSO6},
		{"hash report's 20 bytes refused", acked | virtio.NetHashReport, map[int]bool{20: true}, nil, ErrNotSupported, 10, before},
	} {
		f := &fakeBackend{hdr: 10, offloads: before, refuseHdr: c.refuseHdr, refuseOff: c.refuseOff}
		d, err := ApplyGuestFeatures(f, c.acked)
		if !errors.Is(err, c.wantErr) || (err != nil) != (c.wantErr != nil) {
			t.Errorf("%s: %v, want %v", c.name, err, c.wantErr)
		}
		if f.hdr != c.wantHdr || f.offloads != c.wantOff {
			t.Errorf("%s: header %d and offloads %v after the call, want %d and %v", c.name, f.hdr, f.offloads, c.wantHdr, c.wantOff)
		}
		if err == nil && d.Offloads != f.offloads {
			t.Errorf("%s: decision says %v, backend has %v", c.name, d.Offloads, f.offloads)
		}
	}
}

// TestSentinelsAreShared: callers may test against macvtap's sentinels or
// internal/errs' (and so vdpa's, vhostnet's): they are the same values.
func TestSentinelsAreShared(t *testing.T) {
	for _, c := range []struct{ ours, shared error }{
		{ErrNotSupported, errs.ErrNotSupported}, {ErrInvalid, errs.ErrInvalid}, {ErrConflict, errs.ErrConflict},
		{ErrClosed, errs.ErrClosed}, {ErrNotAvailable, errs.ErrNotAvailable}, {ErrBusy, errs.ErrBusy},
	} {
		if c.ours != c.shared {
			t.Errorf("%v is not internal/errs' value", c.ours)
		}
	}
}
