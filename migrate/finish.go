package migrate

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/netctl/netctl/attach"
	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/state"
)

// FinishRequest names one side of a migration that QEMU has finished.
type FinishRequest struct {
	QMP      string
	VMName   string
	StateDir string
	// Wait bounds the wait for an incoming migration still under way
	// and for the source QEMU to exit (default 30 s).
	Wait time.Duration
	// Quit confirms, on the source, that the destination runs the guest
	// (its finish succeeded): only then does Finish quit the source QEMU.
	// A source whose migration completed still holds the guest, paused:
	// if the destination failed to load it, cont resumes it there.
	Quit bool
}

// Finished says what Finish did.
type Finished struct {
	Side      string   `json:"side"` // "source" or "destination"
	VM        string   `json:"vm"`
	Announced []string `json:"announced,omitempty"` // destination: the NICs announce-self ran for
	Removed   []string `json:"removed,omitempty"`   // source: the NICs whose host side and records went
}

// Finish ends a migration on one side, by QEMU's run state:
//
//   - the destination (running or paused after its incoming migration):
//     announce-self for its netctl NICs, so switches learn that their
//     MACs moved (QEMU announces once by itself; this is the operator's
//     second, like libvirt's after its Finish phase);
//   - the source (postmigrate: the guest was sent), with Quit only (the
//     operator's word that the destination runs it: the source cannot
//     know, and a destination that failed to load the guest leaves it
//     here, paused, to resume with cont): quit QEMU, wait for it to exit,
//     then collect what netctl made for it (netctl gc): its taps,
//     macvtaps and vdpa devices and the records, so netctl list is right.
//
// Any other state (a migration under way, failed or cancelled: the source
// runs the guest) is refused and nothing changes.
func Finish(ctx context.Context, r FinishRequest) (*Finished, error) {
	if r.Wait <= 0 {
		r.Wait = 30 * time.Second
	}
	sock, err := filepath.Abs(r.QMP)
	if err != nil || r.QMP == "" {
		return nil, fmt.Errorf("migrate finish: name the VM (--vm NAME or --qmp SOCKET): %w", errs.ErrInvalid)
	}
	c, err := qmp.Dial(ctx, sock)
	if err != nil {
		return nil, fmt.Errorf("migrate finish: connect to QEMU: %w", err)
	}
	defer c.Close()
	q, err := readVM(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("migrate finish: %w", err)
	}
	deadline := time.Now().Add(r.Wait)
	for q.status == "inmigrate" && time.Now().Before(deadline) {
		// A destination whose load failed stays inmigrate when QEMU does
		// not exit on the error (migrate-incoming exit-on-error=false,
		// QEMU 9.1+); query-migrate says failed, and why.
		var in struct {
			Status string `json:"status"`
			Error  string `json:"error-desc"`
		}
		if err := c.Run(ctx, "query-migrate", nil, &in); err == nil && (in.Status == "failed" || in.Status == "cancelled") {
			return nil, fmt.Errorf("migrate finish: %s's incoming migration %s (%.200s): the guest is still on the source: resume it there with cont; quit this QEMU, then netctl gc here: nothing changed: %w",
				q.name, in.Status, firstLine(in.Error), errs.ErrConflict)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("migrate finish: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
		if q, err = readVM(ctx, c); err != nil {
			return nil, fmt.Errorf("migrate finish: %w", err)
		}
	}
	vm := r.VMName
	if vm == "" {
		vm = q.name
	}
	pid, err := c.PeerPID()
	if err != nil {
		return nil, fmt.Errorf("migrate finish: %w", err)
	}
	store, err := state.Open(r.StateDir)
	if err != nil {
		return nil, fmt.Errorf("migrate finish: %w", err)
	}
	recs, _, err := store.List(state.KeyFor(vm, sock))
	if err != nil {
		return nil, fmt.Errorf("migrate finish: %w", err)
	}
	var ids []string
	for _, n := range recs {
		if n.QEMUPID == pid && n.Libvirt == nil {
			ids = append(ids, n.ID)
		}
	}
	switch q.status {
	case "running", "paused":
		var mig struct {
			Status string `json:"status"`
		}
		// On the destination query-migrate says nothing of the incoming
		// side in every QEMU; the run state left inmigrate, which is
		// what matters.
		_ = c.Run(ctx, "query-migrate", nil, &mig)
		if mig.Status != "" && mig.Status != "completed" && mig.Status != "none" {
			return nil, fmt.Errorf("migrate finish: %s is %s and its outgoing migration is %s: this is the source of a migration under way: wait for it: %w", vm, q.status, mig.Status, errs.ErrConflict)
		}
		if len(ids) == 0 {
			return nil, fmt.Errorf("migrate finish: QEMU runs %s with no NIC netctl attached (netctl list): nothing to finish here: %w", vm, state.ErrNotFound)
		}
		if err := c.Run(ctx, "announce-self", map[string]any{"initial": 50, "max": 550, "rounds": 5, "step": 100, "interfaces": ids}, nil); err != nil {
			return nil, fmt.Errorf("migrate finish: announce-self: %w", err)
		}
		return &Finished{Side: "destination", VM: vm, Announced: ids}, nil
	case "postmigrate":
		if !r.Quit {
			return nil, fmt.Errorf("migrate finish: %s sent its guest and waits, paused: if the destination runs it (netctl migrate finish there succeeded), run this again with --quit "+
				"to quit this QEMU and remove its NICs; if the destination failed to load it, resume it here with cont: nothing changed: %w", vm, errs.ErrConflict)
		}
		start, err := state.ProcStartTime(pid)
		if err != nil {
			return nil, fmt.Errorf("migrate finish: %w", err)
		}
		if err := c.Run(ctx, "quit", nil, nil); err != nil && state.SameProcess(pid, start) {
			return nil, fmt.Errorf("migrate finish: quit the source QEMU: %w", err)
		}
		c.Close()
		for state.SameProcess(pid, start) {
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("migrate finish: the source QEMU (pid %d) did not exit after quit: %w", pid, errs.ErrBusy)
			}
			time.Sleep(50 * time.Millisecond)
		}
		res, err := attach.GC(ctx, attach.GCRequest{StateDir: r.StateDir, Sockets: []string{sock}})
		if err != nil {
			return nil, fmt.Errorf("migrate finish: the source QEMU exited; collecting its NICs: %w (run netctl gc)", err)
		}
		f := &Finished{Side: "source", VM: vm}
		for _, n := range res.NICs {
			if n.QEMUPID == pid {
				if n.Error != "" {
					return f, fmt.Errorf("migrate finish: the source QEMU exited; collecting NIC %s: %s (netctl gc tries again)", n.ID, n.Error)
				}
				f.Removed = append(f.Removed, n.ID)
			}
		}
		return f, nil
	case "inmigrate":
		return nil, fmt.Errorf("migrate finish: %s is still waiting for its migration after %s: run migrate-incoming (and migrate on the source), then finish: %w", vm, r.Wait, errs.ErrBusy)
	}
	return nil, fmt.Errorf("migrate finish: %s is %s, neither the destination of a finished migration (running) nor its source (postmigrate): nothing changed: %w", vm, q.status, errors.ErrUnsupported)
}

// firstLine is s up to its first line break.
func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}
