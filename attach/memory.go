package attach

import (
	"context"
	"fmt"
	"strings"

	"github.com/netctl/netctl/qmp"
)

// memdev is one of query-memdev's entries.
type memdev struct {
	ID    string `json:"id"`
	Share bool   `json:"share"`
	Size  uint64 `json:"size"`
}

// checkSharedRAM refuses a VM whose guest RAM is not shared memory, for a
// vdpa device whose parent maps process virtual addresses (VDUSE): the
// kernel's vhost-vdpa maps only shared file-backed mappings for such a
// device and skips the rest without an error, so the guest reaches
// DRIVER_OK and QEMU reports vhost started, yet no buffer ever moves
// (measured in the 6.12 test VM with QEMU 7.2's default private RAM).
// Every memory backend must be shared (query-memdev: the machine's RAM is
// one, "pc.ram" by default, and NUMA nodes add theirs).
func checkSharedRAM(ctx context.Context, c *qmp.Client) error {
	var mds []memdev
	if err := c.Run(ctx, "query-memdev", nil, &mds); err != nil {
		return fmt.Errorf("query-memdev: %w", err)
	}
	if len(mds) > maxIDs {
		return fmt.Errorf("query-memdev: %d memory backends (at most %d): %w", len(mds), maxIDs, ErrInvalid)
	}
	var private []string
	for _, m := range mds {
		if !m.Share {
			private = append(private, fmt.Sprintf("%.64s (%d MiB)", m.ID, m.Size>>20))
		}
	}
	if len(mds) == 0 || len(private) > 0 {
		what := "QEMU lists no memory backend"
		if len(private) > 0 {
			what = "its RAM is private: " + strings.Join(private, ", ")
		}
		return fmt.Errorf("this vdpa device's parent (VDUSE) maps process virtual addresses, and the kernel's vhost-vdpa "+
			"maps only shared memory for it: %s, so no packet would move. Start QEMU with "+
			"-object memory-backend-memfd,id=mem,size=SIZE,share=on -machine memory-backend=mem: %w", what, ErrNotSupported)
	}
	return nil
}
