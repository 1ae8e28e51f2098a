package vdpa

import (
	"context"
	"errors"
	"os"
)

// Remove deletes the vdpa device name on a connection of its own (like
// `vdpa dev del NAME`); a device that is not there is no error, so that
// an undo or a cleanup can run it whatever happened before. Errors are
// Dial's (ErrNoVDPA on a kernel without vdpa) and DeleteDevice's.
func Remove(ctx context.Context, name string) error {
	c, err := Dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.DeleteDevice(ctx, name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
