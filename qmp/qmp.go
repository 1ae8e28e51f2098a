// Package qmp is a client for QEMU's machine protocol (QMP) over a unix
// socket: the capabilities handshake, commands with their replies and
// errors, asynchronous events (kept aside, not mixed into replies), and fd
// passing with SCM_RIGHTS, which is how a VMM receives the tap and vhost fds
// netctl opens (getfd, then netdev_add with fds=/vhostfds=).
//
// A Client is safe for concurrent use: commands are sent one at a time.
// Every call that waits takes a context.
package qmp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Error is an error QEMU answered a command with.
type Error struct {
	Command string
	Class   string `json:"class"`
	Desc    string `json:"desc"`
}

func (e *Error) Error() string {
	return fmt.Sprintf("qmp: %s: %s (%s)", e.Command, e.Desc, e.Class)
}

// Event is an asynchronous QMP event.
type Event struct {
	Event string          `json:"event"`
	Data  json.RawMessage `json:"data"`
}

// Greeting is what QEMU says first.
type Greeting struct {
	QMP struct {
		Version struct {
			QEMU struct {
				Major int `json:"major"`
				Minor int `json:"minor"`
				Micro int `json:"micro"`
			} `json:"qemu"`
			Package string `json:"package"`
		} `json:"version"`
		Capabilities []string `json:"capabilities"`
	} `json:"QMP"`
}

// Client is a QMP connection.
type Client struct {
	mu       sync.Mutex // one command at a time; guards events
	conn     *net.UnixConn
	r        *bufio.Reader
	Greeting Greeting
	events   []Event
	nextID   int
}

// Dial connects to a QMP socket and does the capabilities handshake.
func Dial(ctx context.Context, path string) (*Client, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("qmp: connect %s: %w (is QEMU running with -qmp unix:%s,server=on,wait=off?)", path, err, path)
	}
	cl, err := New(ctx, c.(*net.UnixConn))
	if err != nil {
		c.Close()
		return nil, err
	}
	return cl, nil
}

// New runs the handshake on an open connection, which the Client then owns.
func New(ctx context.Context, conn *net.UnixConn) (*Client, error) {
	c := &Client{conn: conn, r: bufio.NewReader(conn)}
	stop := c.deadline(ctx)
	defer stop()
	line, err := c.r.ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("qmp: no greeting: %w", err)
	}
	if err := json.Unmarshal(line, &c.Greeting); err != nil || c.Greeting.QMP.Capabilities == nil {
		return nil, fmt.Errorf("qmp: not a QMP greeting: %q", line)
	}
	if _, err := c.execute(ctx, "qmp_capabilities", nil, nil); err != nil {
		return nil, err
	}
	return c, nil
}

// deadline applies ctx's deadline (and cancellation) to the connection.
func (c *Client) deadline(ctx context.Context) func() {
	if dl, ok := ctx.Deadline(); ok {
		c.conn.SetDeadline(dl)
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			c.conn.SetDeadline(time.Unix(1, 0))
		case <-done:
		}
	}()
	return func() { close(done); c.conn.SetDeadline(time.Time{}) }
}

// Execute runs a command with arguments (nil for none) and returns the raw
// "return" value. A QEMU error is an *Error.
func (c *Client) Execute(ctx context.Context, cmd string, args any) (json.RawMessage, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	stop := c.deadline(ctx)
	defer stop()
	return c.execute(ctx, cmd, args, nil)
}

// Run is Execute decoding the reply into out (which may be nil).
func (c *Client) Run(ctx context.Context, cmd string, args, out any) error {
	raw, err := c.Execute(ctx, cmd, args)
	if err != nil || out == nil {
		return err
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("qmp: %s: decode reply: %w", cmd, err)
	}
	return nil
}

// SendFD passes fd to QEMU under name (getfd), for a later netdev_add
// with fds=name or vhostfds=name. The caller keeps its fd.
func (c *Client) SendFD(ctx context.Context, name string, fd int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	stop := c.deadline(ctx)
	defer stop()
	_, err := c.execute(ctx, "getfd", map[string]string{"fdname": name}, unix.UnixRights(fd))
	return err
}

func (c *Client) execute(ctx context.Context, cmd string, args any, oob []byte) (json.RawMessage, error) {
	c.nextID++
	id := c.nextID
	req := map[string]any{"execute": cmd, "id": id}
	if args != nil {
		req["arguments"] = args
	}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	b = append(b, '\n')
	if _, _, err := c.conn.WriteMsgUnix(b, oob, nil); err != nil {
		return nil, c.ioErr(ctx, cmd, err)
	}
	for {
		line, err := c.r.ReadBytes('\n')
		if err != nil {
			return nil, c.ioErr(ctx, cmd, err)
		}
		var m struct {
			Return json.RawMessage `json:"return"`
			Error  *Error          `json:"error"`
			Event  string          `json:"event"`
			Data   json.RawMessage `json:"data"`
			ID     *int            `json:"id"`
		}
		if err := json.Unmarshal(line, &m); err != nil {
			return nil, fmt.Errorf("qmp: %s: bad reply %q: %w", cmd, line, err)
		}
		switch {
		case m.Event != "":
			c.events = append(c.events, Event{Event: m.Event, Data: m.Data})
			continue
		case m.ID != nil && *m.ID != id:
			continue // a stale reply
		case m.Error != nil:
			m.Error.Command = cmd
			return nil, m.Error
		case m.Return != nil:
			return m.Return, nil
		}
		return nil, fmt.Errorf("qmp: %s: reply with neither return nor error: %q", cmd, line)
	}
}

func (c *Client) ioErr(ctx context.Context, cmd string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("qmp: %s: %w (QEMU did not answer in time)", cmd, ctx.Err())
	}
	if errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("qmp: %s: connection closed: %w", cmd, err)
	}
	return fmt.Errorf("qmp: %s: %w", cmd, err)
}

// Events returns and clears the events received so far.
func (c *Client) Events() []Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	ev := c.events
	c.events = nil
	return ev
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// PeerPID is the process ID of the QEMU at the other end (SO_PEERCRED):
// diagnose reads that process's backend file descriptors.
func (c *Client) PeerPID() (int, error) {
	rc, err := c.conn.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var gerr error
	if err := rc.Control(func(fd uintptr) { cred, gerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return 0, err
	}
	if gerr != nil {
		return 0, fmt.Errorf("qmp: SO_PEERCRED: %w", gerr)
	}
	return int(cred.Pid), nil
}
