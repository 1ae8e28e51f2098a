package vdpa

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
)

// Client talks to the vdpa family. It is safe for concurrent use: requests
// are serialised, each under its own context's deadline. It owns its
// netlink socket, which Close closes.
//
// Every call returns when its context ends, even when the kernel does not
// answer: while any vdpa dev del in the system waits for a vhost-vdpa fd
// to close, the kernel holds every other vdpa request too (they wait for
// the family's device lock, uninterruptibly). The abandoned request then
// keeps the socket until the kernel answers it, and later calls wait for
// it only as long as their own context allows.
type Client struct {
	mu  sync.Mutex      // guards c
	c   *genetlink.Conn // nil after Close
	sem chan struct{}   // one token, held while a request is on the socket (possibly abandoned)

	fam       genetlink.Family // the vdpa family as resolved by Dial
	deadlines bool             // the socket takes deadlines (the genltest fake does not)
	// dial opens a second socket for DEV_DEL, so that the Client's own
	// socket is not the one the kernel holds.
	dial func() (*genetlink.Conn, error)
}

// Dial opens the vdpa family (like `vdpa mgmtdev show` does first).
// Outside the initial network namespace, or without the vdpa module, the
// error says so and wraps ErrNotAvailable (ErrNoVDPA). ctx bounds the
// family lookup.
func Dial(ctx context.Context) (*Client, error) {
	dial := func() (*genetlink.Conn, error) { return genetlink.Dial(nil) }
	c, err := dial()
	if err != nil {
		return nil, fmt.Errorf("vdpa: generic netlink: %w", err)
	}
	cl, err := newClient(ctx, c, dial)
	if err != nil {
		c.Close()
		return nil, err
	}
	return cl, nil
}

// newClient resolves the family on c, which the Client then owns.
func newClient(ctx context.Context, c *genetlink.Conn, dial func() (*genetlink.Conn, error)) (*Client, error) {
	cl := &Client{c: c, dial: dial, sem: make(chan struct{}, 1)}
	cl.deadlines = c.SetDeadline(time.Time{}) == nil
	var fam genetlink.Family
	err := cl.withDeadline(ctx, func(c *genetlink.Conn) error {
		var err error
		fam, err = c.GetFamily(linux.VDPA_GENL_NAME)
		return err
	})
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, noFamilyError(err)
		}
		return nil, fmt.Errorf("vdpa: %w", err)
	}
	cl.fam = fam
	return cl, nil
}

// Loaded says, without netlink, whether the kernel has vdpa at all: the
// vdpa bus in sysfs (not per network namespace). nil does not mean the
// family answers (Dial says).
func Loaded() error {
	if _, err := os.Stat("/sys/bus/vdpa"); err != nil {
		return noVDPAError(err)
	}
	return nil
}

func noVDPAError(err error) error {
	return fmt.Errorf("vdpa: %w: this kernel has no vdpa support loaded: modprobe vdpa "+
		"(CONFIG_VDPA, Linux 5.12+; Debian 12's 6.1 kernel has none): %w", ErrNoVDPA, err)
}

func noFamilyError(err error) error {
	// The vdpa bus is not per network namespace: without it the kernel
	// has no vdpa at all, wherever this runs.
	if Loaded() != nil {
		return noVDPAError(err)
	}
	if !inInitialNetns() {
		return fmt.Errorf("vdpa: %w: the vdpa family exists only in the initial network namespace; "+
			"run this in the host's namespace (not in a container or 'ip netns exec'): %w", ErrNoVDPA, err)
	}
	return fmt.Errorf("vdpa: %w: %w", ErrNoVDPA, err)
}

// inInitialNetns compares this thread's network namespace with init's.
func inInitialNetns() bool {
	var a, b unix.Stat_t
	if unix.Stat("/proc/thread-self/ns/net", &a) != nil || unix.Stat("/proc/1/ns/net", &b) != nil {
		return true // cannot tell: do not claim otherwise
	}
	return a.Ino == b.Ino && a.Dev == b.Dev
}

// Close closes the netlink socket. Closing twice is not an error; any
// other call after Close fails with ErrClosed.
//
// Close does not wait for a request the kernel still holds; the socket is
// released once the kernel answers it.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.c == nil {
		return nil
	}
	err := c.c.Close()
	c.c = nil
	return err
}

// withDeadline runs f on the socket with ctx's deadline on it, and
// returns when f does or when ctx ends, whichever comes first; in the
// second case f goes on until the kernel answers, holding the socket, and
// its result is dropped. The error wraps ctx's error when ctx ended the
// call.
func (c *Client) withDeadline(ctx context.Context, f func(*genetlink.Conn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("vdpa: an earlier request is still waiting for the kernel (a vdpa dev del held back "+
			"by an open vhost-vdpa fd holds every vdpa request): %w", ctx.Err())
	}
	c.mu.Lock()
	conn := c.c
	c.mu.Unlock()
	if conn == nil {
		<-c.sem
		return fmt.Errorf("vdpa: netlink client: %w", ErrClosed)
	}
	done := make(chan error, 1)
	go func() {
		defer func() { <-c.sem }()
		if c.deadlines {
			dl, _ := ctx.Deadline() // zero: none
			if err := conn.SetDeadline(dl); err != nil {
				done <- err
				return
			}
			defer conn.SetDeadline(time.Time{})
		}
		done <- f(conn)
	}()
	select {
	case err := <-done:
		if err != nil && ctx.Err() != nil {
			return fmt.Errorf("%w (%w)", ctx.Err(), err)
		}
		return err
	case <-ctx.Done():
		return fmt.Errorf("vdpa: the kernel did not answer in time (is a vdpa dev del waiting for a "+
			"vhost-vdpa fd to close?): %w", ctx.Err())
	}
}

// execute sends one request and checks that every reply carries the
// command the kernel answers it with (reply; 0 for an ack only).
func (c *Client) execute(ctx context.Context, cmd, reply uint8, flags netlink.HeaderFlags, enc func(*netlink.AttributeEncoder)) ([]genetlink.Message, error) {
	req, err := c.request(cmd, enc)
	if err != nil {
		return nil, err
	}
	var msgs []genetlink.Message
	err = c.withDeadline(ctx, func(conn *genetlink.Conn) error {
		var err error
		msgs, err = conn.Execute(req, c.fam.ID, flags)
		return err
	})
	if err != nil {
		return nil, wrapErr(err)
	}
	if reply == 0 {
		return nil, nil
	}
	for _, m := range msgs {
		if m.Header.Command != reply {
			return nil, fmt.Errorf("reply with command %d, want %d: %w", m.Header.Command, reply, ErrInvalid)
		}
	}
	return msgs, nil
}

func (c *Client) request(cmd uint8, enc func(*netlink.AttributeEncoder)) (genetlink.Message, error) {
	ae := netlink.NewAttributeEncoder()
	if enc != nil {
		enc(ae)
	}
	data, err := ae.Encode()
	if err != nil {
		return genetlink.Message{}, err
	}
	return genetlink.Message{Header: genetlink.Header{Command: cmd, Version: linux.VDPA_GENL_VERSION}, Data: data}, nil
}

// wrapErr keeps the kernel's extended-ack text and the errno.
func wrapErr(err error) error {
	if err == nil {
		return nil
	}
	var oe *netlink.OpError
	if errors.As(err, &oe) && oe.Message != "" {
		return fmt.Errorf("%s: %w", oe.Message, oe.Err)
	}
	if errors.As(err, &oe) {
		return oe.Err
	}
	return err
}

func notExist(err error) error {
	if errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("%w (%w)", os.ErrNotExist, err)
	}
	return err
}

// MgmtDevs lists the management devices (like `vdpa mgmtdev show`).
func (c *Client) MgmtDevs(ctx context.Context) ([]MgmtDev, error) {
	msgs, err := c.execute(ctx, linux.VDPA_CMD_MGMTDEV_GET, linux.VDPA_CMD_MGMTDEV_NEW, netlink.Request|netlink.Dump, nil)
	if err != nil {
		return nil, fmt.Errorf("vdpa: mgmtdev show: %w", err)
	}
	out := make([]MgmtDev, 0, len(msgs))
	for _, m := range msgs {
		d, err := decodeMgmtDev(m.Data)
		if err != nil {
			return nil, fmt.Errorf("vdpa: mgmtdev show: %w", err)
		}
		out = append(out, d)
	}
	return out, nil
}

// Devices lists the vDPA devices (like `vdpa dev show`).
func (c *Client) Devices(ctx context.Context) ([]Device, error) {
	msgs, err := c.execute(ctx, linux.VDPA_CMD_DEV_GET, linux.VDPA_CMD_DEV_NEW, netlink.Request|netlink.Dump, nil)
	if err != nil {
		return nil, fmt.Errorf("vdpa: dev show: %w", err)
	}
	out := make([]Device, 0, len(msgs))
	for _, m := range msgs {
		d, err := decodeDevice(m.Data)
		if err != nil {
			return nil, fmt.Errorf("vdpa: dev show: %w", err)
		}
		out = append(out, d)
	}
	return out, nil
}

// Device returns one device by name (like `vdpa dev show NAME`); a missing
// device wraps os.ErrNotExist.
func (c *Client) Device(ctx context.Context, name string) (Device, error) {
	msgs, err := c.execute(ctx, linux.VDPA_CMD_DEV_GET, linux.VDPA_CMD_DEV_NEW, netlink.Request, func(ae *netlink.AttributeEncoder) {
		ae.String(linux.VDPA_ATTR_DEV_NAME, name)
	})
	if err != nil {
		return Device{}, fmt.Errorf("vdpa: dev show %s: %w", name, notExist(err))
	}
	if len(msgs) != 1 {
		return Device{}, fmt.Errorf("vdpa: dev show %s: %d replies, want 1: %w", name, len(msgs), ErrInvalid)
	}
	d, err := decodeDevice(msgs[0].Data)
	if err == nil && d.Name != name {
		err = fmt.Errorf("the reply is for device %q: %w", d.Name, ErrInvalid)
	}
	if err != nil {
		return Device{}, fmt.Errorf("vdpa: dev show %s: %w", name, err)
	}
	return d, nil
}

// Config reads one device's config (like `vdpa dev config show NAME`).
func (c *Client) Config(ctx context.Context, name string) (Config, error) {
	msgs, err := c.execute(ctx, linux.VDPA_CMD_DEV_CONFIG_GET, linux.VDPA_CMD_DEV_CONFIG_GET, netlink.Request, func(ae *netlink.AttributeEncoder) {
		ae.String(linux.VDPA_ATTR_DEV_NAME, name)
	})
	if err != nil {
		return Config{}, fmt.Errorf("vdpa: dev config show %s: %w", name, notExist(err))
	}
	if len(msgs) != 1 {
		return Config{}, fmt.Errorf("vdpa: dev config show %s: %d replies, want 1: %w", name, len(msgs), ErrInvalid)
	}
	cfg, err := decodeConfig(msgs[0].Data)
	if err == nil && cfg.Name != name {
		err = fmt.Errorf("the reply is for device %q: %w", cfg.Name, ErrInvalid)
	}
	if err != nil {
		return Config{}, fmt.Errorf("vdpa: dev config show %s: %w", name, err)
	}
	return cfg, nil
}

// Configs reads every device's config (like `vdpa dev config show`).
func (c *Client) Configs(ctx context.Context) ([]Config, error) {
	msgs, err := c.execute(ctx, linux.VDPA_CMD_DEV_CONFIG_GET, linux.VDPA_CMD_DEV_CONFIG_GET, netlink.Request|netlink.Dump, nil)
	if err != nil {
		return nil, fmt.Errorf("vdpa: dev config show: %w", err)
	}
	out := make([]Config, 0, len(msgs))
	for _, m := range msgs {
		cfg, err := decodeConfig(m.Data)
		if err != nil {
			return nil, fmt.Errorf("vdpa: dev config show: %w", err)
		}
		out = append(out, cfg)
	}
	return out, nil
}

// VStats reads a queue's vendor statistics (like `vdpa dev vstats show
// NAME qidx N`; CAP_NET_ADMIN). Devices whose driver has none (VDUSE)
// answer EOPNOTSUPP, which the error wraps with ErrNotSupported, and
// before FEATURES_OK the kernel answers EAGAIN.
func (c *Client) VStats(ctx context.Context, name string, queue uint32) (Config, []VendorStat, error) {
	msgs, err := c.execute(ctx, linux.VDPA_CMD_DEV_VSTATS_GET, linux.VDPA_CMD_DEV_VSTATS_GET, netlink.Request, func(ae *netlink.AttributeEncoder) {
		ae.String(linux.VDPA_ATTR_DEV_NAME, name)
		ae.Uint32(linux.VDPA_ATTR_DEV_QUEUE_INDEX, queue)
	})
	if err != nil {
		switch {
		case errors.Is(err, unix.EOPNOTSUPP):
			return Config{}, nil, fmt.Errorf("vdpa: vstats %s queue %d: this device's driver has no per-queue statistics: %w (%w)",
				name, queue, ErrNotSupported, err)
		case errors.Is(err, unix.EAGAIN):
			return Config{}, nil, fmt.Errorf("vdpa: vstats %s queue %d: the driver has not negotiated features yet (FEATURES_OK): %w", name, queue, err)
		}
		return Config{}, nil, fmt.Errorf("vdpa: vstats %s queue %d: %w", name, queue, notExist(err))
	}
	if len(msgs) != 1 {
		return Config{}, nil, fmt.Errorf("vdpa: vstats %s: %d replies, want 1: %w", name, len(msgs), ErrInvalid)
	}
	cfg, stats, err := decodeVStats(msgs[0].Data)
	if err != nil {
		return Config{}, nil, fmt.Errorf("vdpa: vstats %s queue %d: %w", name, queue, err)
	}
	return cfg, stats, nil
}
