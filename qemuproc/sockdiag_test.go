package qemuproc

import (
	"errors"
	"testing"
)

func TestParseUnixDiag(t *testing.T) {
	var got []unixSock
	b := append(diagReply(7, 9, "/run/vm/qmp.sock"), diagReply(8, 0, "\x00abs")...)
	if err := parseNetlink(b, func(typ uint16, p []byte) error {
		if typ != 20 {
			t.Errorf("type %d", typ)
		}
		s, err := parseUnixDiag(p)
		got = append(got, s)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	want := []unixSock{{Ino: 7, Peer: 9, State: tcpEstablished, Name: "/run/vm/qmp.sock"}, {Ino: 8, State: tcpEstablished, Name: "@abs"}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if _, err := parseUnixDiag(make([]byte, 3)); !errors.Is(err, ErrInvalid) {
		t.Errorf("short reply: %v", err)
	}
	bad := diagReply(1, 2, "x")
	bad[32] = 200 // the first attribute's length, past the end
	if err := parseNetlink(bad, func(_ uint16, p []byte) error { _, err := parseUnixDiag(p); return err }); !errors.Is(err, ErrInvalid) {
		t.Errorf("attribute past the end: %v", err)
	}
	bad = diagReply(1, 2, "x")
	bad[0] = 200 // message length past the end
	if err := parseNetlink(bad, func(uint16, []byte) error { return nil }); !errors.Is(err, ErrInvalid) {
		t.Errorf("message past the end: %v", err)
	}
}
