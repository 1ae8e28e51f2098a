package main

import (
	"errors"
	"fmt"
)

// undoStack holds the undo of every step that changed something, in the
// order the steps ran; run undoes them newest first. Not safe for
// concurrent use.
type undoStack struct {
	steps []undoStep
}

type undoStep struct {
	what string
	fn   func() error
}

// push records the undo of a step that has just succeeded.
func (u *undoStack) push(what string, fn func() error) {
	u.steps = append(u.steps, undoStep{what, fn})
}

// run undoes every step, newest first, even when one fails, and empties
// the stack. The error lists each undo that failed.
func (u *undoStack) run() error {
	var errs []error
	for i := len(u.steps) - 1; i >= 0; i-- {
		if err := u.steps[i].fn(); err != nil {
			errs = append(errs, fmt.Errorf("undo %s: %w", u.steps[i].what, err))
		}
	}
	u.steps = nil
	return errors.Join(errs...)
}
