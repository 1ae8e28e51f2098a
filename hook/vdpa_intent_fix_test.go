package hook

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/netctl/netctl/hostnic"
	"github.com/netctl/netctl/internal/errs"
)

// realishVDPA refuses a vdpa device name that exists, as RealDevices'
// CreateVDPA does ("vdpa NAME exists and netctl did not create it").
type realishVDPA struct{ *fakeDevices }

func (r realishVDPA) CreateVDPA(ctx context.Context, it hostnic.VDPASpec) (string, error) {
	if _, ok := r.vdpas[it.Name]; ok {
		return "", fmt.Errorf("vdpa %s exists and netctl did not create it for this domain: %w", it.Name, errs.ErrConflict)
	}
	return r.fakeDevices.CreateVDPA(ctx, it)
}

// crashAfterVDPA stops the calling goroutine right after CreateVDPA made
// the device (added, bound to vhost_vdpa, its node waited for: seconds),
// before the record names it.
type crashAfterVDPA struct{ realishVDPA }

func (c crashAfterVDPA) CreateVDPA(ctx context.Context, it hostnic.VDPASpec) (string, error) {
	p, err := c.realishVDPA.CreateVDPA(ctx, it)
	if err == nil {
		runtime.Goexit()
	}
	return p, err
}

// TestReviewPrepareAfterCrashAfterVDPA (failed before the fix): the vdpa
// twin of TestPrepareAfterCrashAfterTap. A hook killed between
// CreateVDPA and the record's save leaves vdpa device vm1vdpa0 that no
// record names: the next prepare refuses it ("exists and netctl did not
// create it") and the release leaves it, so the domain cannot start until
// someone runs vdpa dev del by hand. The tap got an intent record before
// CreateTap; the vdpa device needs one too (name and mgmtdev before
// CreateVDPA; release and the next prepare delete a device of that name
// from that mgmtdev that no other record holds or means to make).
func TestReviewPrepareAfterCrashAfterVDPA(t *testing.T) {
	for _, next := range []string{"prepare", "release"} {
		t.Run(next, func(t *testing.T) {
			f := newFake(t)
			h, log, vd := newTestHook(t, f)
			h.Devices = realishVDPA{f}
			ctx := context.Background()
			crashed := *h
			crashed.Devices = crashAfterVDPA{realishVDPA{f}}
			runToCrash(&crashed, ctx, "netctl-all", "prepare", "begin", bytes.NewReader(allXML(t, vd)))
			if _, ok := f.vdpas["vm1vdpa0"]; !ok {
				t.Fatalf("the crash came before the vdpa device: %s", f.snapshot())
			}
			afterCrash(t, h, f, log, vd, next)
		})
	}
}

// crashBeforeVDPA stops the calling goroutine as CreateVDPA is called:
// the intent is recorded, the device not made.
type crashBeforeVDPA struct{ realishVDPA }

func (crashBeforeVDPA) CreateVDPA(context.Context, hostnic.VDPASpec) (string, error) {
	runtime.Goexit()
	return "", nil
}

// TestReviewVDPAIntentLeavesOthersDevice: a dead prepare's vdpa intent
// does not delete a device of that name that another domain's record
// holds (made after the crash for the same <source dev> name).
func TestReviewVDPAIntentLeavesOthersDevice(t *testing.T) {
	f := newFake(t)
	h, log, vd := newTestHook(t, f)
	h.Devices = realishVDPA{f}
	ctx := context.Background()
	crashed := *h
	crashed.Devices = crashBeforeVDPA{realishVDPA{f}}
	runToCrash(&crashed, ctx, "netctl-all", "prepare", "begin", bytes.NewReader(allXML(t, vd)))
	if _, ok := f.vdpas["vm1vdpa0"]; ok {
		t.Fatalf("the crash came after the vdpa device")
	}
	other := bytes.ReplaceAll(allXML(t, vd), []byte("<name>netctl-all</name>"), []byte("<name>other</name>"))
	other = bytes.ReplaceAll(other, []byte("vm1tap0"), []byte("vm2tap0"))
	if _, err := h.Run(ctx, "other", "prepare", "begin", bytes.NewReader(other)); err != nil {
		t.Fatalf("other domain: %v", err)
	}
	theirs := f.ids["vm1vdpa0"]
	if _, err := h.Run(ctx, "netctl-all", "release", "end", nil); err != nil {
		t.Fatalf("release: %v", err)
	}
	if _, ok := f.vdpas["vm1vdpa0"]; !ok || f.ids["vm1vdpa0"] != theirs {
		t.Errorf("the dead prepare's release deleted the other domain's vdpa device\nlog:\n%s", log)
	}
	if _, err := h.Run(ctx, "other", "release", "end", nil); err != nil {
		t.Fatal(err)
	}
	if got := f.snapshot(); got != "eth0#2" {
		t.Errorf("left %s\nlog:\n%s", got, log)
	}
}
