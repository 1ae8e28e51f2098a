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
	Verb     string        // ping, send, recv, offload, tcpstats
	Duration time.Duration // send
	MAC      string        // offload
	On       bool          // offload
}

// ParseCommand parses one command line (see the package doc). It never
// panics; a bad line is an error that says what is accepted.
func ParseCommand(line string) (Command, error) {
	f := strings.Fields(line)
	if len(f) == 0 {
		return Command{}, fmt.Errorf("empty command: send MS, recv, offload MAC on|off or ping")
	}
	c := Command{Verb: f[0]}
	switch {
	case c.Verb == "ping" && len(f) == 1, c.Verb == "recv" && len(f) == 1, c.Verb == "tcpstats" && len(f) == 1:
	case c.Verb == "send" && len(f) == 2:
		ms, err := strconv.Atoi(f[1])
		if err != nil || ms < 1 || ms > 600000 {
			return Command{}, fmt.Errorf("send %q: give milliseconds, 1 to 600000", f[1])
		}
		c.Duration = time.Duration(ms) * time.Millisecond
	case c.Verb == "offload" && len(f) == 3 && (f[2] == "on" || f[2] == "off"):
		mac, err := net.ParseMAC(f[1])
		if err != nil || len(mac) != 6 {
			return Command{}, fmt.Errorf("offload %q: give the NIC's Ethernet MAC", f[1])
		}
		c.MAC, c.On = mac.String(), f[2] == "on"
	default:
		return Command{}, fmt.Errorf("%.40q: the commands are send MS, recv, offload MAC on|off, tcpstats and ping", line)
	}
	return c, nil
}
