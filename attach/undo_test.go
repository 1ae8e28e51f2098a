package attach

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestUndoEachStepOwnDeadline: an undo that hangs until its deadline (a
// QEMU that does not answer closefd) must not leave the undos below it
// without time: each gets its own. Before the fix the stack shared one
// 15 s deadline, so the macvtap's and the record's undos under a hung QMP
// undo ran with an expired context.
func TestUndoEachStepOwnDeadline(t *testing.T) {
	old := undoStepTimeout
	undoStepTimeout = 200 * time.Millisecond
	t.Cleanup(func() { undoStepTimeout = old })
	var u undoStack
	var below error
	u.push("below", func(ctx context.Context) error {
		below = ctx.Err()
		if d, ok := ctx.Deadline(); !ok || time.Until(d) < 100*time.Millisecond {
			below = errors.New("no time left")
		}
		return nil
	})
	u.push("hangs", func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
	err := u.run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "undo hangs") {
		t.Errorf("run: %v; want the hung undo's error", err)
	}
	if below != nil {
		t.Errorf("the undo below a hung one ran with %v; want its own deadline", below)
	}
}

// TestUndoKeepsRecordWhileObjectsStay: the record describes what the
// undos above it remove; when one of them fails, the record must stay so
// that netctl gc (or a retried attach) can find and finish it. Before
// the fix the record was removed anyway: a macvtap that no command could
// find.
func TestUndoKeepsRecordWhileObjectsStay(t *testing.T) {
	var u undoStack
	removed := false
	u.pushRecord("remove the record", func(context.Context) error { removed = true; return nil })
	u.push("delete macvtap nctlmv0", func(context.Context) error { return errors.New("device busy") })
	u.push("closefd", func(context.Context) error { return nil })
	err := u.run(context.Background())
	if removed {
		t.Errorf("the record was removed though deleting the macvtap failed (%v)", err)
	}
	if err == nil || !strings.Contains(err.Error(), "netctl gc") {
		t.Errorf("run: %v; want the failure and that the record stays for netctl gc", err)
	}
	// With every undo done, the record goes.
	u = undoStack{}
	removed = false
	u.pushRecord("remove the record", func(context.Context) error { removed = true; return nil })
	u.push("delete macvtap nctlmv0", func(context.Context) error { return nil })
	if err := u.run(context.Background()); err != nil || !removed {
		t.Errorf("all undos succeeded: run %v, record removed %v", err, removed)
	}
}
