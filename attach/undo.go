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
}

// push records the undo of a step that just succeeded.
func (u *undoStack) push(what string, fn func(ctx context.Context) error) {
	u.steps = append(u.steps, undoStep{what, fn})
}

// run undoes everything in reverse, with its own deadline (the caller's
// context may be what ended), and returns the undos that failed.
func (u *undoStack) run(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	var errs []error
	for i := len(u.steps) - 1; i >= 0; i-- {
		s := u.steps[i]
		if err := s.fn(ctx); err != nil {
			errs = append(errs, fmt.Errorf("undo %s: %w", s.what, err))
			if errors.Is(err, errKeepRest) {
				break
			}
		}
	}
	u.steps = nil
	return errors.Join(errs...)
}

// errKeepRest, from an undo, stops the undos below it: what they would
// undo is still in use and stays (recorded) for netctl detach.
var errKeepRest = errors.New("rollback stopped here")

// drop forgets the undos: the sequence succeeded.
func (u *undoStack) drop() { u.steps = nil }
