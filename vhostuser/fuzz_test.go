package vhostuser

import (
	"encoding/binary"
	"reflect"
	"testing"

	"github.com/netctl/netctl/internal/fuzzalloc"
)

// encodeSeed lays out a message as bytes for the fuzzer: the fd count in
// the first byte, then header and payload as on the wire.
func encodeSeed(m *Message) []byte {
	b := []byte{byte(len(m.FDs))}
	b = append(b, header(m.Request, m.Flags, uint32(len(m.Payload)))...)
	return append(b, m.Payload...)
}

// FuzzDecode checks that no sequence of bytes and no fd count makes
// Decode panic or accept a body whose encoding differs from the payload.
// Seeds: the QEMU 7.2 handshake as its front-end lays it out.
func FuzzDecode(f *testing.F) {
	for _, m := range qemuHandshake() {
		f.Add(encodeSeed(m))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 1+HeaderSize {
			return
		}
		nfds := int(data[0]) % (MaxFDs + 2)
		h := data[1 : 1+HeaderSize]
		m := &Message{Header: Header{
			Request: Request(binary.LittleEndian.Uint32(h[0:])),
			Flags:   Flags(binary.LittleEndian.Uint32(h[4:])),
			Size:    binary.LittleEndian.Uint32(h[8:]),
		}, Payload: data[1+HeaderSize:], FDs: make([]int, nfds)}
		var body Body
		var err error
		fuzzalloc.Check(t, len(data), func() { body, err = Decode(m) })
		if err != nil {
			return
		}
		// What was accepted must survive a round trip (padding aside).
		again := &Message{Header: m.Header, Payload: body.Encode(), FDs: m.FDs}
		again.Size = uint32(len(again.Payload))
		body2, err := Decode(again)
		if err != nil {
			t.Fatalf("%v: decoded %#v, whose encoding Decode refuses: %v", m, body, err)
		}
		if !reflect.DeepEqual(body, body2) {
			t.Fatalf("%v: decoded %#v, re-encoded and decoded %#v", m, body, body2)
		}
	})
}

// FuzzReadMessage writes arbitrary bytes into a connection and reads
// messages from it until an error: no panic, no allocation beyond the
// bound, and every message within MaxPayload. Seeds: QEMU 7.2's
// handshake.
func FuzzReadMessage(f *testing.F) {
	for _, m := range qemuHandshake() {
		f.Add(encodeSeed(m)[1:])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		a, b := socketPair(t)
		go func() {
			a.Write(data)
			a.CloseWrite()
		}()
		var msgs []*Message
		fuzzalloc.Check(t, len(data), func() {
			for {
				m, err := ReadMessage(b)
				if err != nil {
					return
				}
				msgs = append(msgs, m)
			}
		})
		for _, m := range msgs {
			if len(m.Payload) > MaxPayload || int(m.Size) != len(m.Payload) || len(m.FDs) != 0 {
				t.Fatalf("read %v", m)
			}
		}
	})
}
