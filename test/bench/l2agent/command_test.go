package main

import (
	"net"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/fuzzalloc"
)

func TestParseCommand(t *testing.T) {
	for _, tc := range []struct {
		line string
		want Command
		ok   bool
	}{
		{"ping\n", Command{Verb: "ping"}, true},
		{"recv\n", Command{Verb: "recv"}, true},
		{"tcpstats\n", Command{Verb: "tcpstats"}, true},
		{"send 4000\n", Command{Verb: "send", Duration: 4 * time.Second}, true},
		{"offload 52:54:00:12:00:01 off\n", Command{Verb: "offload", MAC: "52:54:00:12:00:01"}, true},
		{"offload 52:54:00:12:00:01 on\n", Command{Verb: "offload", MAC: "52:54:00:12:00:01", On: true}, true},
		{"rrserve\n", Command{Verb: "rrserve"}, true},
		{"sendto 10.93.0.3 5000\n", Command{Verb: "sendto", Peer: "10.93.0.3", Duration: 5 * time.Second}, true},
		{"rr 10.94.0.3 250\n", Command{Verb: "rr", Peer: "10.94.0.3", Duration: 250 * time.Millisecond}, true},
		{"sendto 10.93.0.3\n", Command{}, false},
		{"sendto fe80::1 5000\n", Command{}, false},
		{"rr 10.94.0.300 250\n", Command{}, false},
		{"rr 10.94.0.3 0\n", Command{}, false},
		{"rr 10.94.0.3 600001\n", Command{}, false},
		{"rrserve 1\n", Command{}, false},
		{"send -1\n", Command{}, false},
		{"send 99999999999999999999\n", Command{}, false},
		{"offload nope on\n", Command{}, false},
		{"offload 52:54:00:12:00:01 maybe\n", Command{}, false},
		{"\n", Command{}, false},
		{"rm -rf /\n", Command{}, false},
	} {
		got, err := ParseCommand(tc.line)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseCommand(%q) = %+v, %v; want %+v, ok %v", tc.line, got, err, tc.want, tc.ok)
		}
	}
}

// FuzzParseCommand: no line makes ParseCommand panic, and what it accepts
// is one of the commands with its bounds.
func FuzzParseCommand(f *testing.F) {
	for _, s := range []string{"ping\n", "recv\n", "send 4000\n", "offload 52:54:00:12:00:01 off\n", "send 0\n", "offload 00:11:22:33:44:55:66:77 on\n",
		"sendto 10.93.0.3 5000\n", "rr 10.94.0.3 250\n", "rrserve\n", "rr ::ffff:10.0.0.1 1\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		var c Command
		var err error
		fuzzalloc.Check(t, len(line), func() { c, err = ParseCommand(line) })
		if err != nil {
			return
		}
		switch c.Verb {
		case "ping", "recv", "offload", "tcpstats", "rrserve":
			if c.Peer != "" || c.Duration != 0 {
				t.Fatalf("%s accepted with a peer or duration: %+v", c.Verb, c)
			}
		case "send", "sendto", "rr":
			if c.Duration < time.Millisecond || c.Duration > 600*time.Second {
				t.Fatalf("%s accepted with %v", c.Verb, c.Duration)
			}
			if ip := net.ParseIP(c.Peer).To4(); (c.Verb == "send") != (c.Peer == "") || (c.Peer != "" && (ip == nil || ip.String() != c.Peer)) {
				t.Fatalf("%s accepted with peer %q", c.Verb, c.Peer)
			}
		default:
			t.Fatalf("accepted verb %q", c.Verb)
		}
	})
}
