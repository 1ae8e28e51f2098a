package attach

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// undoStack holds the undo of every step done so far; run calls them in
// reverse.
type undoStack struct {
	steps []undoStep
}

type undoStep struct {
	what string
	fn   func(ctx context.Context) error
	// record: this step removes the record that describes what the
	// steps above it undo; it runs only when all of them succeeded.
	record bool
}

// undoStepTimeout bounds each undo on its own: one that hangs (a QEMU
// that does not answer) leaves the others their full time.
var undoStepTimeout = 15 * time.Second

// pushRecord pushes the removal of the record that describes what the
// steps pushed after it create. run skips it when any of those undos
// failed: the record then stays, so that netctl gc or a retried attach
// can find what is left and finish.
func (u *undoStack) pushRecord(what string, fn func(ctx context.Context) error) {
	u.steps = append(u.steps, undoStep{what: what, fn: fn, record: true})
}

// push records the undo of a step that just succeeded.
func (u *undoStack) push(what string, fn func(ctx context.Context) error) {
	u.steps = append(u.steps, undoStep{what: what, fn: fn})
}

// run undoes everything in reverse, each undo with its own deadline (the
// caller's context may be what ended), and returns the undos that failed.
func (u *undoStack) run(ctx context.Context) error {
	base := context.WithoutCancel(ctx)
	var errs []error
	for i := len(u.steps) - 1; i >= 0; i-- {
		s := u.steps[i]
		if s.record && len(errs) > 0 {
			errs = append(errs, fmt.Errorf("kept the record, which says what is left: run netctl gc (or the same attach again) to finish"))
			break
		}
		sctx, cancel := context.WithTimeout(base, undoStepTimeout)
		err := s.fn(sctx)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("undo %s: %w", s.what, err))
			if errors.Is(err, errKeepRest) {
				break
			}
		}
	}
	u.steps = nil
	return errors.Join(errs...)
}

// runTop undoes the last step pushed only (one that turned out not to
// be needed), with its own deadline.
func (u *undoStack) runTop(ctx context.Context) error {
	if len(u.steps) == 0 {
		return nil
	}
	s := u.steps[len(u.steps)-1]
	u.steps = u.steps[:len(u.steps)-1]
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), undoStepTimeout)
	defer cancel()
	if err := s.fn(sctx); err != nil {
		return fmt.Errorf("undo %s: %w", s.what, err)
	}
	return nil
}

// errKeepRest, from an undo, stops the undos below it: what they would
// undo is still in use and stays (recorded) for netctl detach.
var errKeepRest = errors.New("rollback stopped here")

// drop forgets the undos: the sequence succeeded.
func (u *undoStack) drop() { u.steps = nil }
