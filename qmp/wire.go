package qmp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// MaxLine is the longest line (one JSON message and its newline) the
// client accepts from QEMU. QEMU's largest reply, query-qmp-schema, is
// about 200 KiB on QEMU 7.2; a longer line is a protocol error, so a
// misbehaving peer cannot make the client allocate without bound.
const MaxLine = 4 << 20

// ErrProtocol is wrapped by every error about what QEMU sent: a line
// longer than MaxLine, a line that is not a JSON object, a reply of the
// wrong shape or to a request that was never sent. After such an error
// the client is out of step with QEMU and every later call fails; dial
// again.
var ErrProtocol = errors.New("qmp: protocol error")

// lineReader reads newline-terminated lines of at most MaxLine bytes. A
// read that fails part-way (a deadline) keeps what it has read, so the
// next read finishes that line instead of starting in its middle.
type lineReader struct {
	r       *bufio.Reader
	partial []byte
}

func (l *lineReader) readLine() ([]byte, error) {
	for {
		frag, err := l.r.ReadSlice('\n')
		if len(l.partial)+len(frag) > MaxLine {
			l.partial = nil
			return nil, fmt.Errorf("%w: a line from QEMU is longer than %d bytes", ErrProtocol, MaxLine)
		}
		l.partial = append(l.partial, frag...)
		switch {
		case err == nil:
			line := l.partial
			l.partial = nil
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return nil, err
		}
	}
}

// parseGreeting decodes QEMU's first line.
func parseGreeting(line []byte) (Greeting, error) {
	var g Greeting
	if err := strictObject(line, &g); err != nil || g.QMP.Capabilities == nil {
		if err == nil {
			err = errors.New(`no "QMP" object with "capabilities"`)
		}
		return Greeting{}, fmt.Errorf("%w: not a QMP greeting (%v): %s", ErrProtocol, err, quote(line))
	}
	return g, nil
}

// message is one line QEMU sends after the greeting: a reply (Return or
// Error, with the request's ID) or an event.
type message struct {
	Return json.RawMessage `json:"return"`
	Error  *Error          `json:"error"`
	Event  string          `json:"event"`
	Data   json.RawMessage `json:"data"`
	ID     json.RawMessage `json:"id"`
}

// parseMessage decodes and checks the shape of one message: an event has a
// non-empty name and no return or error; a reply has exactly one of return
// and error, and its id, if any, is a number.
func parseMessage(line []byte) (message, error) {
	var m message
	if err := strictObject(line, &m); err != nil {
		return message{}, fmt.Errorf("%w: %v: %s", ErrProtocol, err, quote(line))
	}
	bad := func(why string) (message, error) {
		return message{}, fmt.Errorf("%w: %s: %s", ErrProtocol, why, quote(line))
	}
	isNull := func(r json.RawMessage) bool { return r == nil || bytes.Equal(r, []byte("null")) }
	if isNull(m.Return) {
		m.Return = nil
	}
	if isNull(m.Data) {
		m.Data = nil
	}
	if isNull(m.ID) {
		m.ID = nil
	}
	switch {
	case m.Event != "":
		if m.Return != nil || m.Error != nil {
			return bad("an event with a return or error")
		}
		if m.Data != nil && m.Data[0] != '{' {
			return bad(`an event whose "data" is not an object`)
		}
		return m, nil
	case m.Return != nil && m.Error != nil:
		return bad("a reply with both return and error")
	case m.Return == nil && m.Error == nil:
		return bad("a message that is neither a reply nor an event")
	}
	if m.ID != nil {
		var id int64
		if err := json.Unmarshal(m.ID, &id); err != nil {
			return bad(`a reply whose "id" is not an integer`)
		}
	}
	return m, nil
}

// strictObject decodes one JSON object (and nothing after it) into v.
func strictObject(line []byte, v any) error {
	t := bytes.TrimSpace(line)
	if len(t) == 0 || t[0] != '{' {
		return errors.New("not a JSON object")
	}
	d := json.NewDecoder(bytes.NewReader(t))
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("more than one JSON value on a line")
	}
	return nil
}

// quote shows at most 200 bytes of a line in an error message.
func quote(line []byte) string {
	line = bytes.TrimRight(line, "\r\n")
	if len(line) > 200 {
		return fmt.Sprintf("%q... (%d bytes)", line[:200], len(line))
	}
	return fmt.Sprintf("%q", line)
}
