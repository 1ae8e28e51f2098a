package hook

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/netctl/netctl/hostnic"
)

// crashBeforeTap stops the calling goroutine as CreateTap is called: the
// intent record is saved, the tap not yet made (a SIGKILL in that window).
type crashBeforeTap struct{ *fakeDevices }

func (c crashBeforeTap) CreateTap(hostnic.PersistentTap) (int, error) {
	runtime.Goexit()
	return 0, nil
}

// meanwhile runs during CreateTap, right after the tap is made and
// before Prepare records its ifindex: what another hook process (another
// domain's lock) can do in that window.
type meanwhile struct {
	*fakeDevices
	then func()
}

func (m meanwhile) CreateTap(it hostnic.PersistentTap) (int, error) {
	ix, err := m.fakeDevices.CreateTap(it)
	if err == nil {
		m.then()
	}
	return ix, err
}

// TestReviewStaleIntentLeavesTapInTheMaking: domain netctl-all's prepare
// died after recording the intent to make tap vm1tap0 and before making
// it. Domain other now makes vm1tap0 (its own <target dev>); its record
// holds the tap as an intent (ifindex 0) until CreateTap returns. A
// release of netctl-all in that window (another process: the locks are
// per domain) must not take other's new tap for its own. Before the fix
// pendingTap counted only other records' taps with an ifindex, and the
// release deleted the tap other was making.
func TestReviewStaleIntentLeavesTapInTheMaking(t *testing.T) {
	f := newFake(t)
	h, log, vd := newTestHook(t, f)
	ctx := context.Background()
	crashed := *h
	crashed.Devices = crashBeforeTap{f}
	runToCrash(&crashed, ctx, "netctl-all", "prepare", "begin", bytes.NewReader(allXML(t, vd)))
	if rec, err := h.Store.LoadDomain("netctl-all"); err != nil || len(rec.Taps) != 1 || rec.Taps[0].Ifindex != 0 {
		t.Fatalf("no intent record after the crash: %+v %v", rec, err)
	}
	other := bytes.ReplaceAll(allXML(t, vd), []byte("<name>netctl-all</name>"), []byte("<name>other</name>"))
	other = bytes.ReplaceAll(other, []byte("vm1vdpa0"), []byte("vm2vdpa0"))
	making := *h
	making.Devices = meanwhile{f, func() {
		if _, err := h.Run(ctx, "netctl-all", "release", "end", nil); err != nil {
			t.Errorf("release of netctl-all: %v", err)
		}
	}}
	if _, err := making.Run(ctx, "other", "prepare", "begin", bytes.NewReader(other)); err != nil {
		t.Fatalf("other domain: %v", err)
	}
	rec, err := h.Store.LoadDomain("other")
	if err != nil || len(rec.Taps) != 1 {
		t.Fatalf("other's record: %+v %v", rec, err)
	}
	if ix := f.links["vm1tap0"]; ix == 0 || ix != rec.Taps[0].Ifindex {
		t.Errorf("netctl-all's release deleted the tap other was making (other recorded ifindex %d, the host has %d)\nlog:\n%s", rec.Taps[0].Ifindex, ix, log)
	}
}

// TestReviewTwoStaleIntentsFreeTheTap: two domains' prepares died with
// an intent for the same tap name, one before and one after making it:
// releasing both (in either order) leaves no tap and no record.
func TestReviewTwoStaleIntentsFreeTheTap(t *testing.T) {
	for _, order := range [][2]string{{"netctl-all", "other"}, {"other", "netctl-all"}} {
		f := newFake(t)
		h, log, vd := newTestHook(t, f)
		ctx := context.Background()
		other := bytes.ReplaceAll(allXML(t, vd), []byte("<name>netctl-all</name>"), []byte("<name>other</name>"))
		other = bytes.ReplaceAll(other, []byte("vm1vdpa0"), []byte("vm2vdpa0"))
		for _, c := range []struct {
			name string
			dev  Devices
			x    []byte
		}{{"netctl-all", crashBeforeTap{f}, allXML(t, vd)}, {"other", crashingDevices{f}, other}} {
			crashed := *h
			crashed.Devices = c.dev
			runToCrash(&crashed, ctx, c.name, "prepare", "begin", bytes.NewReader(c.x))
		}
		for _, d := range order {
			if _, err := h.Run(ctx, d, "release", "end", nil); err != nil {
				t.Errorf("release %s: %v", d, err)
			}
		}
		ds, _, _ := h.Store.ListDomains()
		if got := f.snapshot(); got != "eth0#2" || len(ds) != 0 {
			t.Errorf("releases in order %v left %s and %d record(s)\nlog:\n%s", order, got, len(ds), log)
		}
	}
}

// TestReviewPrepareAfterCrashAfterPublish: a hook killed right after it
// published a vdpa device's link, before the save that recorded the
// link, left a symlink that the next prepare refused ("exists and netctl
// did not publish it for this domain") and no release removed: the
// domain could not start until someone removed the link by hand. The
// link is now recorded before it is published.
func TestReviewPrepareAfterCrashAfterPublish(t *testing.T) {
	for _, next := range []string{"prepare", "release"} {
		t.Run(next, func(t *testing.T) {
			f := newFake(t)
			h, log, vd := newTestHook(t, f)
			ctx := context.Background()
			publishVDPA = func(link, vhost string) error {
				if err := hostnic.Publish(link, vhost); err != nil {
					return err
				}
				runtime.Goexit()
				return nil
			}
			runToCrash(h, ctx, "netctl-all", "prepare", "begin", bytes.NewReader(allXML(t, vd)))
			publishVDPA = hostnic.Publish
			afterCrash(t, h, f, log, vd, next)
			if _, err := os.Lstat(filepath.Join(vd, "vm1vdpa0")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the published link is left: %v", err)
			}
		})
	}
}

// TestReviewReleaseAgainCommandWorks: the command a failed release says
// to run again must release that domain from those records when pasted
// into a shell, whatever the domain's name (libvirt allows "-x", spaces,
// quotes) and wherever the records are (the installed script's
// --run-dir; libvirt filters the environment, so the hook is not run
// with NETCTL_RUN_DIR). Before the fix it was 'netctl hook qemu -x y
// release end -': a flag to the shell and netctl, and the default run
// dir.
func TestReviewReleaseAgainCommandWorks(t *testing.T) {
	f := newFake(t)
	h, _, vd := newTestHook(t, f)
	ctx := context.Background()
	name := `-x it's`
	x := bytes.ReplaceAll(allXML(t, vd), []byte("<name>netctl-all</name>"), []byte("<name>-x it&apos;s</name>"))
	if _, err := h.Run(ctx, name, "prepare", "begin", bytes.NewReader(x)); err != nil {
		t.Fatal(err)
	}
	f.failAt = "delvdpa vm1vdpa0"
	_, err := h.Run(ctx, name, "release", "end", nil)
	if err == nil {
		t.Fatal("release did not fail")
	}
	want := "netctl hook qemu --run-dir '" + h.Store.Dir + `' -- '-x it'\''s' release end -`
	if !strings.Contains(err.Error(), want) {
		t.Errorf("release error %q\ndoes not say %q", err, want)
	}
}
