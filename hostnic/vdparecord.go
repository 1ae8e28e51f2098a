package hostnic

import (
	"context"
	"errors"
	"os"

	"github.com/netctl/netctl/state"
)

// DeleteRecordedVDPA deletes the vdpa device v records, only if netctl
// created it and it is still that device (its identity, when kept, is
// v.Ino), and says whether it did: a device that is gone is no error,
// one deleted and added again under the name is left alone. Every face
// that deletes a recorded vdpa device goes through it.
func DeleteRecordedVDPA(ctx context.Context, h Host, v *state.VDPA) (deleted bool, err error) {
	if v == nil || !v.Created || NotCreatedVDPA(v) != "" {
		return false, nil
	}
	if v.Ino != 0 {
		id, err := h.VDPAIdentity(v.Name)
		switch {
		case errors.Is(err, os.ErrNotExist):
			return false, nil
		case err != nil:
			return false, err
		case id != v.Ino:
			return false, nil // someone else's since: not netctl's to delete
		}
	}
	if err := h.DeleteVDPA(ctx, v.Name); err != nil {
		return false, err
	}
	return true, nil
}
