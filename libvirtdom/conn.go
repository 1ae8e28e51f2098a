package libvirtdom

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/netctl/netctl/internal/errs"
)

// ErrUnreachable is wrapped by Dial's errors when no daemon answers on
// the socket (none listens, or it does not finish the handshake).
var ErrUnreachable = fmt.Errorf("libvirt not reachable: %w", errs.ErrNotAvailable)

// Conn is one connection to libvirtd or virtqemud. It is safe for
// concurrent use. Close it when done.
type Conn struct {
	URI    string // as given ("" is DefaultURI)
	Socket string // the socket dialled
	Driver string // the URI opened over it: qemu:///system or qemu:///session

	l  Client
	nc net.Conn

	closeOnce sync.Once
}

// Dial connects to the daemon of uri (ParseURI) and opens its driver,
// both within ctx: the socket is dialled from the calling goroutine (in
// the caller's mount namespace), then the RPC handshake runs. A socket
// that does not exist or refuses the connection gives an error that asks
// whether libvirtd is running and names the socket; EACCES says who may
// connect.
func Dial(ctx context.Context, uri string) (*Conn, error) {
	t, err := ParseURI(uri)
	if err != nil {
		return nil, err
	}
	if uri == "" {
		uri = DefaultURI
	}
	newc := registeredClient()
	if newc == nil {
		return nil, notLinked(uri)
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", t.Socket)
	if err != nil {
		switch {
		case errors.Is(err, os.ErrPermission):
			return nil, fmt.Errorf("libvirt %s: socket %s: %w (needs root, or a user in group libvirt)", uri, t.Socket, err)
		case len(t.Sockets) > 1:
			return nil, fmt.Errorf("libvirt %s: is libvirtd (or virtqemud) running? socket %s (looked for %v): %w: %w", uri, t.Socket, t.Sockets, err, ErrUnreachable)
		}
		return nil, fmt.Errorf("libvirt %s: is libvirtd running? socket %s: %w: %w", uri, t.Socket, err, ErrUnreachable)
	}
	c := &Conn{URI: uri, Socket: t.Socket, Driver: t.Open, nc: nc, l: newc(nc)}
	if err := c.do(ctx, "connect", func() error { return c.l.ConnectToURI(t.Open) }); err != nil {
		c.nc.Close()
		return nil, fmt.Errorf("%w: %w", err, ErrUnreachable)
	}
	return c, nil
}

// Close ends the connection (virConnectClose, then the socket); it is
// idempotent.
func (c *Conn) Close() error {
	var err error
	c.closeOnce.Do(func() {
		done := make(chan error, 1)
		go func() { done <- c.l.Disconnect() }()
		select {
		case err = <-done:
		case <-time.After(5 * time.Second):
			err = fmt.Errorf("libvirt %s: no answer to close within 5 s", c.URI)
		}
		c.nc.Close()
	})
	return err
}

// do runs one RPC under ctx. libvirt's RPC cannot be cancelled: when ctx
// ends first, the socket is closed (which fails the call in flight and
// every later one) and the context's error returned.
func (c *Conn) do(ctx context.Context, what string, f func() error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("libvirt %s: %s: %w", c.URI, what, err)
	}
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("libvirt %s: %s: %w", c.URI, what, wrapLibvirt(err))
		}
		return nil
	case <-ctx.Done():
		c.nc.Close()
		return fmt.Errorf("libvirt %s: %s: no answer from the daemon on %s in time (the connection is closed): %w", c.URI, what, c.Socket, ctx.Err())
	}
}

// wrapLibvirt maps libvirt's error codes onto netctl's sentinels where
// one fits, keeping libvirt's message (and the Error, for As).
func wrapLibvirt(err error) error {
	var le Error
	if !errors.As(err, &le) {
		return err
	}
	switch le.Code {
	case ErrCodeNoDomain:
		return fmt.Errorf("%w: %w", err, os.ErrNotExist)
	case ErrCodeNoSupport:
		return fmt.Errorf("%w: %w", err, errs.ErrNotSupported)
	case ErrCodeOperationInvalid:
		return fmt.Errorf("%w: %w", err, errs.ErrInvalid)
	}
	return err
}

// Answered says err carries the daemon's own answer (a libvirt error
// reply): the call was refused and did nothing. Any other error (no
// answer in time, the connection lost) leaves the outcome unknown: the
// daemon may have done, or still do, what was asked.
func Answered(err error) bool {
	var le Error
	return errors.As(err, &le)
}
