package libvirtdom

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netctl/netctl/internal/errs"
)

// unregister makes Dial see no Client (and no Unlinked) for the test.
func unregister(t *testing.T) {
	saved, savedUnlinked := registeredClient(), Unlinked
	RegisterClient(nil)
	Unlinked = nil
	t.Cleanup(func() { RegisterClient(saved); Unlinked = savedUnlinked })
}

// TestDialNotLinked: without a registered Client, Dial dials nothing and
// fails with ErrNotLinked; with Unlinked set, it calls that first and
// returns its error (still ErrNotLinked to errors.Is). A URI it cannot
// parse is refused as before.
func TestDialNotLinked(t *testing.T) {
	unregister(t)
	sock := filepath.Join(t.TempDir(), "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dialled := make(chan struct{}, 4)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			dialled <- struct{}{}
			c.Close()
		}
	}()
	uri := "qemu+unix:///system?socket=" + sock
	_, err = Dial(context.Background(), uri)
	if !errors.Is(err, ErrNotLinked) || !errors.Is(err, errs.ErrNotSupported) || !strings.Contains(err.Error(), "libvirtdom/rpc") {
		t.Errorf("Dial without a client: %v", err)
	}
	errHand := errors.New("netctl-full is not installed")
	calls := 0
	Unlinked = func() error { calls++; return errHand }
	_, err = Dial(context.Background(), uri)
	if calls != 1 || !errors.Is(err, errHand) || !errors.Is(err, ErrNotLinked) || !strings.Contains(err.Error(), uri) {
		t.Errorf("Dial without a client, with Unlinked: %v (Unlinked called %d times)", err, calls)
	}
	if strings.Contains(err.Error(), "libvirtdom/rpc") {
		t.Errorf("Unlinked's error carries ErrNotLinked's text too: %v", err)
	}
	if _, err := Dial(context.Background(), "qemu+ssh://host/system"); err == nil || errors.Is(err, ErrNotLinked) || calls != 1 {
		t.Errorf("Dial of a URI it does not take: %v (Unlinked called %d times)", err, calls)
	}
	select {
	case <-dialled:
		t.Error("Dial without a client connected to the socket")
	default:
	}
}

// TestWrapLibvirtError: an Error from the client maps onto netctl's
// sentinels by libvirt's code, keeps its text, and counts as answered.
func TestWrapLibvirtError(t *testing.T) {
	for _, c := range []struct {
		code uint32
		is   error
	}{{ErrCodeNoDomain, os.ErrNotExist}, {ErrCodeNoSupport, errs.ErrNotSupported}, {ErrCodeOperationInvalid, errs.ErrInvalid}} {
		e := Error{Code: c.code, Message: "libvirt said no"}
		err := wrapLibvirt(e)
		if !errors.Is(err, c.is) || !strings.Contains(err.Error(), "libvirt said no") || !Answered(err) {
			t.Errorf("code %d: %v", c.code, err)
		}
	}
	inner := errors.New("client: libvirt said no")
	if err := wrapLibvirt(Error{Code: 1, Message: "libvirt said no", Err: inner}); !errors.Is(err, inner) || err.Error() != inner.Error() || !Answered(err) {
		t.Errorf("Error with the client's own: %v", err)
	}
	if Answered(errors.New("connection reset")) {
		t.Error("an error without libvirt's reply counts as answered")
	}
}
