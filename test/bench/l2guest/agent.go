package l2guest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"regexp"
	"time"

	vnl "github.com/vishvananda/netlink"
)

// AgentPort is where l2agent listens in the nested guest.
const AgentPort = "5201"

// AgentCmd sends one command to the agent at ip and returns its answer
// line (bounded), which must start with "ok".
func AgentCmd(ip, line string) (string, error) {
	return AgentCmdTimeout(ip, line, 30*time.Second)
}

// AgentCmdTimeout is AgentCmd for a command that may take up to timeout
// (sendto, rr).
func AgentCmdTimeout(ip, line string, timeout time.Duration) (string, error) {
	c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, AgentPort), 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return "", err
	}
	return readReply(c)
}

// readReply reads the agent's one answer line, at most 4 KiB.
func readReply(r io.Reader) (string, error) {
	line, err := bufio.NewReaderSize(io.LimitReader(r, 4096), 4096).ReadString('\n')
	if err != nil && line == "" {
		return "", fmt.Errorf("the agent answered nothing: %w", err)
	}
	if len(line) < 2 || line[:2] != "ok" {
		return "", fmt.Errorf("the agent answered %.200q", line)
	}
	return line[:len(line)-1], nil
}

// StreamFromGuest asks the guest to send for d and returns the Mbit/s
// that arrived here, from the first byte to the end.
func StreamFromGuest(ip string, d time.Duration) (float64, error) {
	c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, AgentPort), 5*time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(d + 60*time.Second))
	if _, err := fmt.Fprintf(c, "send %d\n", d.Milliseconds()); err != nil {
		return 0, err
	}
	buf := make([]byte, 256<<10)
	var n int64
	var first time.Time
	for {
		k, err := c.Read(buf)
		if k > 0 && first.IsZero() {
			first = time.Now()
		}
		n += int64(k)
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	secs := time.Since(first).Seconds()
	if n == 0 || secs <= 0 {
		return 0, fmt.Errorf("nothing arrived from %s", ip)
	}
	return float64(n) * 8 / secs / 1e6, nil
}

// StreamToGuest sends to the guest for d and returns the Mbit/s the guest
// counted, from its first byte to the end.
func StreamToGuest(ip string, d time.Duration) (float64, error) {
	c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, AgentPort), 5*time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(d + 60*time.Second))
	if _, err := io.WriteString(c, "recv\n"); err != nil {
		return 0, err
	}
	buf := make([]byte, 256<<10)
	for end := time.Now().Add(d); time.Now().Before(end); {
		if _, err := c.Write(buf); err != nil {
			return 0, err
		}
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		return 0, err
	}
	line, err := readReply(c)
	if err != nil {
		return 0, err
	}
	n, ns, err := ParseRecvReply(line)
	if err != nil {
		return 0, err
	}
	return float64(n) * 8 / (float64(ns) / 1e9) / 1e6, nil
}

var recvReply = regexp.MustCompile(`^ok ([0-9]{1,18}) ([0-9]{1,18})$`)

// ParseRecvReply parses the agent's "ok BYTES NS" after a recv.
func ParseRecvReply(line string) (bytes, ns int64, err error) {
	m := recvReply.FindStringSubmatch(line)
	if m == nil {
		return 0, 0, fmt.Errorf("the agent answered %.100q, want ok BYTES NS", line)
	}
	fmt.Sscan(m[1], &bytes)
	fmt.Sscan(m[2], &ns)
	if bytes == 0 || ns <= 0 {
		return 0, 0, fmt.Errorf("the agent received %d bytes in %d ns", bytes, ns)
	}
	return bytes, ns, nil
}

// AddrUp puts cidr on link and sets it up (in this process's network
// namespace: the bench's own).
func AddrUp(link, cidr string) error {
	l, err := vnl.LinkByName(link)
	if err != nil {
		return fmt.Errorf("link %s: %w", link, err)
	}
	a, err := vnl.ParseAddr(cidr)
	if err != nil {
		return err
	}
	if err := vnl.AddrAdd(l, a); err != nil {
		return fmt.Errorf("address %s on %s: %w", cidr, link, err)
	}
	return vnl.LinkSetUp(l)
}
