package main

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Command is one parsed command line.
type Command struct {
	Verb     string        // ping, send, recv, offload, tcpstats, sendto, rr, rrserve
	Duration time.Duration // send, sendto, rr
	MAC      string        // offload
	On       bool          // offload
	Peer     string        // sendto, rr: the other guest's agent (an IPv4 address)
}

// ParseCommand parses one command line (see the package doc). It never
// panics; a bad line is an error that says what is accepted.
func ParseCommand(line string) (Command, error) {
	f := strings.Fields(line)
	if len(f) == 0 {
		return Command{}, fmt.Errorf("empty command: " + verbs)
	}
	c := Command{Verb: f[0]}
	switch {
	case c.Verb == "ping" && len(f) == 1, c.Verb == "recv" && len(f) == 1, c.Verb == "tcpstats" && len(f) == 1,
		c.Verb == "rrserve" && len(f) == 1:
	case c.Verb == "send" && len(f) == 2:
		d, err := parseMS(c.Verb, f[1])
		if err != nil {
			return Command{}, err
		}
		c.Duration = d
	case (c.Verb == "sendto" || c.Verb == "rr") && len(f) == 3:
		ip := net.ParseIP(f[1]).To4()
		if ip == nil {
			return Command{}, fmt.Errorf("%s %.40q: give the other guest's IPv4 address", c.Verb, f[1])
		}
		d, err := parseMS(c.Verb, f[2])
		if err != nil {
			return Command{}, err
		}
		c.Peer, c.Duration = ip.String(), d
	case c.Verb == "offload" && len(f) == 3 && (f[2] == "on" || f[2] == "off"):
		mac, err := net.ParseMAC(f[1])
		if err != nil || len(mac) != 6 {
			return Command{}, fmt.Errorf("offload %q: give the NIC's Ethernet MAC", f[1])
		}
		c.MAC, c.On = mac.String(), f[2] == "on"
	default:
		return Command{}, fmt.Errorf("%.40q: the commands are %s", line, verbs)
	}
	return c, nil
}

const verbs = "send MS, recv, sendto IP MS, rr IP MS, rrserve, offload MAC on|off, tcpstats or ping"

// parseMS parses a duration in milliseconds, 1 to 600000.
func parseMS(verb, s string) (time.Duration, error) {
	ms, err := strconv.Atoi(s)
	if err != nil || ms < 1 || ms > 600000 {
		return 0, fmt.Errorf("%s %.40q: give milliseconds, 1 to 600000", verb, s)
	}
	return time.Duration(ms) * time.Millisecond, nil
}
