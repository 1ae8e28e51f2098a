package qmp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"testing"

	"github.com/netctl/netctl/internal/fuzzalloc"
)

// transcript is what a real QEMU 7.2 (Debian 1:7.2+dfsg-7+deb12u18) sent
// on its QMP socket for: qmp_capabilities, query-name, query-version,
// query-status, an unknown command, stop, cont, closefd of a name it did
// not have, query-commands and quit, with their STOP, RESUME and SHUTDOWN
// events.
func transcript(t testing.TB) []byte {
	b, err := os.ReadFile("testdata/qemu-7.2-transcript.txt")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// realStatusReply is QEMU 7.2's reply to x-query-virtio-status on a
// virtio-net NIC (saved by policy/diagnose's tests).
func realStatusReply(t testing.TB) []byte {
	b, err := os.ReadFile("../policy/diagnose/testdata/qemu-7.2-status.json")
	if err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, b); err != nil {
		t.Fatal(err)
	}
	return []byte(`{"return": ` + compact.String() + `, "id": 3}` + "\n")
}

var malformedSeeds = []string{
	"", "\n", "null\n", "[1, 2]\n", `"hello"` + "\n", `{"return": {"na`,
	`{"return": {}, "id": "one"}` + "\n", `{"return": {}, "id": 99}` + "\n", `{"event": 5}` + "\n",
	`{"event": "STOP", "data": [1]}` + "\n", `{"error": "boom", "id": 1}` + "\n",
	`{"QMP": {"version": "7.2", "capabilities": ["oob"]}}` + "\n",
	`{"return": {}, "error": {"class": "X", "desc": "y"}, "id": 1}` + "\n",
}

// FuzzGreeting: any first line either is a greeting or an ErrProtocol
// error; a greeting encodes and decodes to itself.
func FuzzGreeting(f *testing.F) {
	lines := bytes.SplitAfter(transcript(f), []byte("\n"))
	f.Add(lines[0])
	f.Add([]byte(greeting72 + "\n"))
	for _, s := range malformedSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var g Greeting
		var err error
		fuzzalloc.Check(t, len(line), func() { g, err = parseGreeting(line) })
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("error %v does not wrap ErrProtocol", err)
			}
			return
		}
		b, err := json.Marshal(g)
		if err != nil {
			t.Fatal(err)
		}
		g2, err := parseGreeting(b)
		if err != nil || !reflect.DeepEqual(g, g2) {
			t.Fatalf("round trip: %+v -> %s -> %+v, %v", g, b, g2, err)
		}
	})
}

// FuzzMessage: any line after the greeting is a reply, an event or an
// ErrProtocol error; decode -> encode -> decode gives the same message.
func FuzzMessage(f *testing.F) {
	for _, l := range bytes.SplitAfter(transcript(f), []byte("\n")) {
		f.Add(l)
	}
	f.Add(realStatusReply(f))
	for _, s := range malformedSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var m message
		var err error
		fuzzalloc.Check(t, len(line), func() { m, err = parseMessage(line) })
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("error %v does not wrap ErrProtocol", err)
			}
			return
		}
		b1, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		m2, err := parseMessage(b1)
		if err != nil {
			t.Fatalf("re-encoded %s: %v", b1, err)
		}
		b2, _ := json.Marshal(m2)
		if !bytes.Equal(b1, b2) || m.Event != m2.Event || (m.Error == nil) != (m2.Error == nil) || (m.ID == nil) != (m2.ID == nil) {
			t.Fatalf("round trip: %s -> %s", b1, b2)
		}
	})
}

// FuzzStream feeds bytes to the client as everything QEMU sends: the
// greeting, then replies to requests 1, 2, ... with events in between. It
// never panics, allocates in proportion to the input, and keeps at most
// MaxEvents events of at most MaxEventBytes.
func FuzzStream(f *testing.F) {
	tr := transcript(f)
	f.Add(tr)
	f.Add(append([]byte(greeting72+"\n"+`{"return": {}, "id": 1}`+"\n"+`{"return": {}, "id": 1}`+"\n"), realStatusReply(f)...))
	lines := bytes.SplitAfter(tr, []byte("\n"))
	f.Add(bytes.Join(append(lines[:1], lines[2:]...), nil)) // a reply missing: the next ids are out of step
	for _, s := range malformedSeeds {
		f.Add(append([]byte(greeting72+"\n"), s...))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c := &Client{r: lineReader{r: bufio.NewReader(bytes.NewReader(data))}}
		fuzzalloc.Check(t, len(data), func() {
			line, err := c.r.readLine()
			if err != nil {
				return
			}
			if c.Greeting, err = parseGreeting(line); err != nil {
				return
			}
			for id := int64(1); ; id++ {
				_, err := c.awaitReply(id)
				var qe *Error
				if err != nil && !errors.As(err, &qe) {
					return
				}
			}
		})
		if len(c.events.ev) > MaxEvents || c.events.bytes > MaxEventBytes {
			t.Fatalf("%d events of %d bytes kept", len(c.events.ev), c.events.bytes)
		}
	})
}

// TestTranscriptReplays: the real transcript decodes as QEMU 7.2's
// greeting, ten replies (two of them errors) and three events.
func TestTranscriptReplays(t *testing.T) {
	c := &Client{r: lineReader{r: bufio.NewReader(bytes.NewReader(transcript(t)))}}
	line, err := c.r.readLine()
	if err != nil {
		t.Fatal(err)
	}
	if c.Greeting, err = parseGreeting(line); err != nil || c.Greeting.QMP.Version.QEMU.Major != 7 || c.Greeting.QMP.Version.QEMU.Minor != 2 {
		t.Fatalf("greeting %+v, %v", c.Greeting, err)
	}
	errs := 0
	for id := int64(1); id <= 10; id++ {
		_, err := c.awaitReply(id)
		var qe *Error
		switch {
		case errors.As(err, &qe):
			errs++
		case err != nil:
			t.Fatalf("reply %d: %v", id, err)
		}
	}
	ev := c.events.take()
	if errs != 2 || len(ev) != 3 || ev[2].Event != "SHUTDOWN" || !bytes.Contains(ev[2].Data, []byte("host-qmp-quit")) {
		t.Errorf("%d errors, events %+v", errs, ev)
	}
}
