package libvirtdom

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/errs"
)

// TestRemovalWait: Wait returns when libvirt's device-removed event for
// the alias arrives (also one that came before the Wait), fails with
// ErrBusy on device-removal-failed, and with ErrPending at its deadline;
// events of other aliases do not end it.
func TestRemovalWait(t *testing.T) {
	ch := make(chan DeviceEvent)
	r := &Removal{cancel: func() {}, removed: map[string]bool{}, failed: map[string]bool{}, changed: make(chan struct{})}
	r.done.Add(1)
	go r.follow(ch)
	ch <- DeviceEvent{Alias: "net0"}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.Wait(ctx, "net0"); err != nil {
		t.Errorf("Wait for an alias removed before it: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Wait(ctx, "net1") }()
	ch <- DeviceEvent{Alias: "net2"}
	ch <- DeviceEvent{Alias: "net1", Failed: true}
	if err := <-done; !errors.Is(err, errs.ErrBusy) {
		t.Errorf("Wait for an alias whose removal failed: %v", err)
	}
	short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelShort()
	if err := r.Wait(short, "net3"); !errors.Is(err, ErrPending) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait past its deadline: %v", err)
	}
	close(ch)
	r.Close()
}
