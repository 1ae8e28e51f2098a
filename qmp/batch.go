package qmp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Cmd is one command of a Batch: Out (nil to ignore it) receives the
// "return" value.
type Cmd struct {
	Name string
	Args any
	Out  any
}

// maxBatchBytes bounds what one Batch writes before it reads a reply:
// QEMU reads a connection's commands one at a time (without the oob
// capability it queues one and stops reading until it has run it), so
// the rest waits in the socket's buffer, which this stays well inside.
const maxBatchBytes = 64 << 10

// Batch runs cmds in order, sending each before the previous one's reply
// has come back: QEMU's monitor runs a connection's commands one after
// another, in the order sent, and answers each in that order, so
// commands whose arguments do not depend on an earlier answer cost one
// round trip instead of one each. The result has one error per command
// (nil: it ran, Out decoded): a QEMU error fails that command alone; a
// connection error (or ctx's end) fails it and every later one: those
// not yet sent are not run, those already sent behind it may have run
// (their errors say so). None may carry fds (SendFD).
func (c *Client) Batch(ctx context.Context, cmds []Cmd) []error {
	errs := make([]error, len(cmds))
	c.mu.Lock()
	defer c.mu.Unlock()
	stop := c.deadline(ctx)
	defer stop()
	for start := 0; start < len(cmds); {
		// Encode as many as fit, then send them in one write.
		var buf []byte
		first := c.nextID + 1
		end := start
		for ; end < len(cmds) && (end == start || len(buf) < maxBatchBytes); end++ {
			req := map[string]any{"execute": cmds[end].Name, "id": first + int64(end-start)}
			if cmds[end].Args != nil {
				req["arguments"] = cmds[end].Args
			}
			b, err := json.Marshal(req)
			if err != nil {
				errs[end] = fmt.Errorf("qmp: %s: encode arguments: %w", cmds[end].Name, err)
				break
			}
			buf = append(append(buf, b...), '\n')
		}
		if c.broken != nil {
			failFrom(errs, cmds, start, fmt.Errorf("the connection is out of step with QEMU after an earlier error (%w); dial again", c.broken))
			return errs
		}
		if end > start {
			c.nextID += int64(end - start)
			n, err := c.conn.Write(buf)
			if err != nil {
				if n > 0 {
					c.broken = err
				}
				failFrom(errs, cmds, start, c.ioErr(ctx, cmds[start].Name, err))
				return errs
			}
			for i := start; i < end; i++ {
				raw, err := c.awaitReply(first + int64(i-start))
				if err != nil {
					var qe *Error
					switch {
					case errors.As(err, &qe):
						qe.Command = cmds[i].Name
						errs[i] = qe
						continue
					case errors.Is(err, ErrProtocol):
						c.broken = err
						err = fmt.Errorf("qmp: %s: %w", cmds[i].Name, err)
					default:
						// The rest were sent: their replies, if any
						// come, are stale ones the next command skips.
						err = c.ioErr(ctx, cmds[i].Name, err)
					}
					// Those sent behind it reached QEMU, or may have.
					for j := i + 1; j < end; j++ {
						errs[j] = fmt.Errorf("qmp: %s: sent, but its reply was not read: it may have run: %w", cmds[j].Name, err)
					}
					failFrom(errs, cmds, i, err)
					return errs
				}
				if cmds[i].Out != nil {
					if err := json.Unmarshal(raw, cmds[i].Out); err != nil {
						errs[i] = fmt.Errorf("qmp: %s: decode reply %s: %w", cmds[i].Name, quote(raw), err)
					}
				}
			}
		}
		if end < len(cmds) && errs[end] != nil { // an argument that does not encode: not sent, nor the rest
			failFrom(errs, cmds, end+1, fmt.Errorf("not sent: command %d (%s) of the batch could not be encoded", end, cmds[end].Name))
			return errs
		}
		start = end
	}
	return errs
}

// failFrom sets errs[from:] (those not already set) to err, each with
// its command's name.
func failFrom(errs []error, cmds []Cmd, from int, err error) {
	for i := from; i < len(cmds); i++ {
		if errs[i] == nil {
			if i == from {
				errs[i] = err
			} else {
				errs[i] = fmt.Errorf("qmp: %s: not run: %w", cmds[i].Name, err)
			}
		}
	}
}
