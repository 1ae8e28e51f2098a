package migrate_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/netctl/netctl/attach"
	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/migrate"
	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/test/qemutest"
)

// TestHostFinishSource: a real QEMU that sent its guest (postmigrate,
// here to a file) is quit by finish only with --quit, and finish removes
// what netctl made for that VM and nothing of another VM: a QEMU killed
// earlier on this host keeps its record (netctl gc is its
// operator's call, not this VM's finish). (The tap netctl made for the
// killed QEMU went with it: a tap that is not persistent goes with its
// last fd.)
func TestHostFinishSource(t *testing.T) {
	testenv.Host(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dir := t.TempDir()
	other, otherCmd := qemutest.StartPaused(t, "other")
	if _, err := attach.Attach(ctx, attach.Request{QMP: other, ID: "net1", StateDir: dir}); err != nil {
		t.Fatal(err)
	}
	otherCmd.Process.Kill()
	otherCmd.Wait()

	src, srcCmd := qemutest.StartPaused(t, "src")
	sn, err := attach.Attach(ctx, attach.Request{QMP: src, ID: "net1", StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrate.Finish(ctx, migrate.FinishRequest{QMP: src, StateDir: dir, Quit: true, Wait: 5 * time.Second}); err == nil {
		t.Fatal("finish --quit on a source that has not migrated: quit it")
	}
	c, err := qmp.Dial(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Run(ctx, "migrate", map[string]string{"uri": "exec:cat > " + filepath.Join(t.TempDir(), "stream")}, nil); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(30 * time.Second); ; {
		var st struct{ Status string }
		if err := c.Run(ctx, "query-status", nil, &st); err != nil {
			t.Fatal(err)
		}
		if st.Status == "postmigrate" {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the source is %s, not postmigrate", st.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.Close()
	if _, err := migrate.Finish(ctx, migrate.FinishRequest{QMP: src, StateDir: dir, Wait: 5 * time.Second}); !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("finish without --quit on a postmigrate source: %v, want a refusal", err)
	}
	f, err := migrate.Finish(ctx, migrate.FinishRequest{QMP: src, StateDir: dir, Quit: true, Wait: 10 * time.Second})
	if err != nil || f.Side != "source" || len(f.Removed) != 1 {
		t.Fatalf("finish --quit: %+v %v", f, err)
	}
	if err := srcCmd.Wait(); err == nil && srcCmd.ProcessState == nil {
		t.Error("the source QEMU did not exit")
	}
	if _, err := netlink.LinkByName(sn.Tap.Name); err == nil {
		t.Errorf("the source's tap %s is still there", sn.Tap.Name)
	}
	ls, err := attach.List(ctx, attach.ListRequest{StateDir: dir})
	if err != nil || len(ls) != 1 || ls[0].VM != "other" {
		t.Errorf("records after finish: %+v %v, want only the other VM's", ls, err)
	}
}
