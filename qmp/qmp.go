// Package qmp is a client for QEMU's machine protocol (QMP) over a unix
// socket: the capabilities handshake, commands with their replies and
// errors, asynchronous events (kept aside, not mixed into replies), and fd
// passing with SCM_RIGHTS, which is how a VMM receives the tap and vhost fds
// netctl opens (getfd, then netdev_add with fds=/vhostfds=).
//
// A Client is safe for concurrent use: commands are sent one at a time.
// Every call that waits takes a context. Everything read from QEMU is
// bounded: a line by MaxLine, the event queue by MaxEvents and
// MaxEventBytes.
package qmp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
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

// Client is a QMP connection. It owns the connection (Close closes it).
//
// A Client is safe for concurrent use. Commands run one at a time; a
// command whose context ends before QEMU answers returns the context's
// error, and the late reply is recognised by its id and skipped by the
// next command. After a protocol error (see ErrProtocol) or a failed
// write the client is out of step with QEMU and every later call fails.
type Client struct {
	Greeting Greeting

	conn *net.UnixConn

	mu     sync.Mutex // guards everything below; held for a whole command
	r      lineReader
	events eventQueue
	nextID int64
	broken error // set when the client and QEMU are out of step
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

// New runs the handshake on an open connection. On success the Client
// owns conn; on failure the caller keeps it (and should close it).
func New(ctx context.Context, conn *net.UnixConn) (*Client, error) {
	c := &Client{conn: conn, r: lineReader{r: bufio.NewReader(conn)}}
	c.mu.Lock()
	defer c.mu.Unlock()
	stop := c.deadline(ctx)
	defer stop()
	// Nothing is written before the greeting says this is QEMU's QMP
	// monitor: a --qmp naming the wrong socket (a guest's serial console,
	// an HMP monitor) must not get a line typed into it. (Sending
	// qmp_capabilities at once would save one round trip.)
	line, err := c.r.readLine()
	if err != nil {
		return nil, c.ioErr(ctx, "waiting for the greeting", err)
	}
	if c.Greeting, err = parseGreeting(line); err != nil {
		return nil, err
	}
	if _, err := c.execute(ctx, "qmp_capabilities", nil, nil); err != nil {
		return nil, err
	}
	return c, nil
}

// deadline applies ctx's deadline and cancellation to the connection until
// the returned function is called. That function returns only after a
// cancellation that raced with it has finished, so it always leaves the
// connection without a deadline.
func (c *Client) deadline(ctx context.Context) (stop func()) {
	if dl, ok := ctx.Deadline(); ok {
		c.conn.SetDeadline(dl)
	}
	fired := make(chan struct{})
	stopWatch := context.AfterFunc(ctx, func() {
		c.conn.SetDeadline(time.Unix(1, 0)) // in the past: wakes a blocked read or write
		close(fired)
	})
	return func() {
		if !stopWatch() {
			<-fired // the cancellation ran or is running: let it finish first
		}
		c.conn.SetDeadline(time.Time{})
	}
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
		return fmt.Errorf("qmp: %s: decode reply %s: %w", cmd, quote(raw), err)
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

// execute sends one command and waits for its reply; c.mu is held.
func (c *Client) execute(ctx context.Context, cmd string, args any, oob []byte) (json.RawMessage, error) {
	if c.broken != nil {
		return nil, fmt.Errorf("qmp: %s: not sent: the connection is out of step with QEMU after an earlier error (%w); dial again", cmd, c.broken)
	}
	c.nextID++
	id := c.nextID
	req := map[string]any{"execute": cmd, "id": id}
	if args != nil {
		req["arguments"] = args
	}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("qmp: %s: encode arguments: %w", cmd, err)
	}
	b = append(b, '\n')
	n, _, err := c.conn.WriteMsgUnix(b, oob, nil)
	if err != nil {
		if n > 0 {
			c.broken = err // half a request went out
		}
		return nil, c.ioErr(ctx, cmd, err)
	}
	raw, err := c.awaitReply(id)
	if err != nil {
		if errors.Is(err, ErrProtocol) {
			c.broken = err
			return nil, fmt.Errorf("qmp: %s: %w", cmd, err)
		}
		var qe *Error
		if errors.As(err, &qe) {
			qe.Command = cmd
			return nil, qe
		}
		return nil, c.ioErr(ctx, cmd, err)
	}
	return raw, nil
}

// awaitReply reads lines until the reply to request id: events are queued,
// replies to earlier requests (whose caller gave up) are skipped. c.mu is
// held.
func (c *Client) awaitReply(id int64) (json.RawMessage, error) {
	for {
		line, err := c.r.readLine()
		if err != nil {
			return nil, err
		}
		m, err := parseMessage(line)
		if err != nil {
			return nil, err
		}
		if m.Event != "" {
			c.events.push(Event{Event: m.Event, Data: m.Data})
			continue
		}
		if m.ID != nil {
			var got int64
			json.Unmarshal(m.ID, &got) // parseMessage checked it
			switch {
			case got < id && got > 0:
				continue // a stale reply to a command whose caller gave up
			case got != id:
				return nil, fmt.Errorf("%w: a reply to request %d, which was never sent (waiting for %d): %s", ErrProtocol, got, id, quote(line))
			}
		}
		if m.Error != nil {
			return nil, m.Error
		}
		return m.Return, nil
	}
}

func (c *Client) ioErr(ctx context.Context, cmd string, err error) error {
	if dl, ok := ctx.Deadline(); ok && errors.Is(err, os.ErrDeadlineExceeded) {
		// The connection's deadline is ctx's: its timer fires at about
		// the same moment, so wait for it and report ctx's error.
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(dl) + 100*time.Millisecond):
		}
	}
	if ctx.Err() != nil {
		return fmt.Errorf("qmp: %s: %w (QEMU did not answer in time)", cmd, ctx.Err())
	}
	if errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("qmp: %s: connection closed: %w", cmd, err)
	}
	// A peer that closes with our request unread resets the connection.
	if errors.Is(err, io.EOF) || errors.Is(err, unix.ECONNRESET) {
		return fmt.Errorf("qmp: %s: QEMU closed the connection: %w", cmd, err)
	}
	return fmt.Errorf("qmp: %s: %w", cmd, err)
}

// Events returns and clears the events received so far (at most
// MaxEvents, MaxEventBytes of them: older ones are dropped and counted by
// DroppedEvents). Events arrive only while a command runs.
func (c *Client) Events() []Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.events.take()
}

// DroppedEvents is how many events were dropped, oldest first, because
// Events was not called before the queue reached MaxEvents or
// MaxEventBytes.
func (c *Client) DroppedEvents() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.events.dropped
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
