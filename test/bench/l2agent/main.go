// Command l2agent is the nested guest's side of attach-bench's data path
// benchmark: a static program in the guest's initramfs that listens on TCP
// port 5201 and, per connection, runs one command line:
//
//	send MS          write to the connection for MS milliseconds, then close
//	                 (guest -> host stream; the host counts what arrives)
//	recv             read until EOF, then answer "ok BYTES NS": the bytes and
//	                 the nanoseconds from the first byte to EOF (host -> guest)
//	offload MAC on|off   turn the guest's offloads of the NIC with that MAC
//	                 on or off (ethtool netlink, like ethtool -K), answer
//	                 "ok" and the features now on
//	sendto IP MS     guest -> guest stream: connect to the agent at IP, ask
//	                 it to recv, write for MS milliseconds, close the
//	                 writing side and pass on its "ok BYTES NS"
//	rr IP MS         request/response (TCP_RR-like): connect to the agent at
//	                 IP, ask it to rrserve, then for MS milliseconds send 1
//	                 byte and wait for its 1-byte answer, one at a time on
//	                 that one connection (TCP_NODELAY); answer "ok N NS": the
//	                 transactions done and the nanoseconds they took
//	rrserve          answer each byte read with one byte, until EOF
//	tcpstats         answer "ok OUTSEGS RETRANSSEGS": the guest's TCP
//	                 counters from /proc/net/snmp
//	ping             answer "ok"
//
// It runs as root in the throwaway nested guest; every connection comes
// from the test VM that started the guest.
package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"
)

func main() {
	l, err := net.Listen("tcp", ":5201")
	if err != nil {
		fmt.Fprintln(os.Stderr, "l2agent:", err)
		os.Exit(1)
	}
	fmt.Println("L2-AGENT listening on :5201")
	for {
		c, err := l.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, "l2agent:", err)
			continue
		}
		go serve(c.(*net.TCPConn))
	}
}

// tcpStats reads OutSegs and RetransSegs from /proc/net/snmp's Tcp lines
// (a header line of names, then one of values).
func tcpStats() (out, retrans uint64, err error) {
	b, err := os.ReadFile("/proc/net/snmp")
	if err != nil {
		return 0, 0, err
	}
	var names []string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || f[0] != "Tcp:" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i := 1; i < len(f) && i < len(names); i++ {
			switch names[i] {
			case "OutSegs":
				fmt.Sscan(f[i], &out)
			case "RetransSegs":
				fmt.Sscan(f[i], &retrans)
			}
		}
		return out, retrans, nil
	}
	return 0, 0, fmt.Errorf("/proc/net/snmp has no Tcp counters")
}

// maxLine bounds a command line.
const maxLine = 256

func serve(c *net.TCPConn) {
	defer c.Close()
	r := bufio.NewReaderSize(c, maxLine)
	line, err := r.ReadSlice('\n')
	if err != nil {
		fmt.Fprintf(c, "err reading the command: %v\n", err)
		return
	}
	cmd, err := ParseCommand(string(line))
	if err != nil {
		fmt.Fprintf(c, "err %v\n", err)
		return
	}
	switch cmd.Verb {
	case "ping":
		fmt.Fprintln(c, "ok")
	case "send":
		buf := make([]byte, 128<<10)
		end := time.Now().Add(cmd.Duration)
		for time.Now().Before(end) {
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	case "recv":
		buf := make([]byte, 128<<10)
		var n int64
		var first time.Time
		if r.Buffered() > 0 {
			first = time.Now()
			k, _ := r.Discard(r.Buffered())
			n += int64(k)
		}
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
				return
			}
		}
		fmt.Fprintf(c, "ok %d %d\n", n, time.Since(first).Nanoseconds())
	case "tcpstats":
		out, retrans, err := tcpStats()
		if err != nil {
			fmt.Fprintf(c, "err %v\n", err)
			return
		}
		fmt.Fprintf(c, "ok %d %d\n", out, retrans)
	case "sendto":
		line, err := sendTo(cmd.Peer, cmd.Duration)
		if err != nil {
			fmt.Fprintf(c, "err %v\n", err)
			return
		}
		fmt.Fprintln(c, line)
	case "rr":
		n, ns, err := requestResponse(cmd.Peer, cmd.Duration)
		if err != nil {
			fmt.Fprintf(c, "err %v\n", err)
			return
		}
		fmt.Fprintf(c, "ok %d %d\n", n, ns)
	case "rrserve":
		b := []byte{0}
		for {
			x, err := r.ReadByte()
			if err != nil {
				return
			}
			b[0] = x
			if _, err := c.Write(b); err != nil {
				return
			}
		}
	case "offload":
		on, err := SetOffloads(cmd.MAC, cmd.On)
		if err != nil {
			fmt.Fprintf(c, "err %v\n", err)
			return
		}
		fmt.Fprintf(c, "ok %s\n", strings.Join(on, ","))
	}
}

// dialPeer connects to the other guest's agent and sends it line.
func dialPeer(ip, line string, d time.Duration) (*net.TCPConn, error) {
	// The first packets between two nested TCG guests (ARP, SYN) have
	// taken more than 5 s.
	p, err := net.DialTimeout("tcp", net.JoinHostPort(ip, "5201"), 60*time.Second)
	if err != nil {
		return nil, err
	}
	p.SetDeadline(time.Now().Add(d + 60*time.Second))
	if _, err := io.WriteString(p, line+"\n"); err != nil {
		p.Close()
		return nil, err
	}
	return p.(*net.TCPConn), nil
}

// sendTo streams to the agent at ip for d and returns its "ok BYTES NS".
func sendTo(ip string, d time.Duration) (string, error) {
	p, err := dialPeer(ip, "recv", d)
	if err != nil {
		return "", err
	}
	defer p.Close()
	buf := make([]byte, 128<<10)
	for end := time.Now().Add(d); time.Now().Before(end); {
		if _, err := p.Write(buf); err != nil {
			return "", err
		}
	}
	if err := p.CloseWrite(); err != nil {
		return "", err
	}
	line, err := bufio.NewReaderSize(io.LimitReader(p, maxLine), maxLine).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ok ") {
		return "", fmt.Errorf("%s answered %.100q to recv: %v", ip, line, err)
	}
	return strings.TrimSuffix(line, "\n"), nil
}

// requestResponse runs 1-byte transactions with the agent at ip for d.
func requestResponse(ip string, d time.Duration) (n, ns int64, err error) {
	p, err := dialPeer(ip, "rrserve", d)
	if err != nil {
		return 0, 0, err
	}
	defer p.Close()
	p.SetNoDelay(true)
	b := []byte{'x'}
	t0 := time.Now()
	for end := t0.Add(d); time.Now().Before(end); n++ {
		if _, err := p.Write(b); err != nil {
			return 0, 0, err
		}
		if _, err := io.ReadFull(p, b); err != nil {
			return 0, 0, err
		}
	}
	return n, time.Since(t0).Nanoseconds(), nil
}
