package qemutest

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"
)

// TestNotQMP: the socket greets with the banner and nothing else.
func TestNotQMP(t *testing.T) {
	c, err := net.Dial("unix", NotQMP(t, "220 smtp ready\r\n", time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "220 smtp ready\r\n" {
		t.Fatalf("greeting %q, %v", line, err)
	}
}

// TestHungQMP: the monitor greets and takes qmp_capabilities, then answers
// nothing; the test's end closes a connection the client still holds
// (a sub-test's cleanup, so this test sees it).
func TestHungQMP(t *testing.T) {
	var c net.Conn
	t.Run("serve", func(t *testing.T) {
		var err error
		c, err = net.Dial("unix", HungQMP(t))
		if err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(c)
		if l, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(l, `{"QMP": {"version": {"qemu": {"micro": 0, "minor": 2, "major": 7}`) {
			t.Fatalf("greeting %q, %v", l, err)
		}
		c.Write([]byte(`{"execute": "qmp_capabilities"}` + "\n"))
		if l, err := r.ReadString('\n'); err != nil || strings.TrimSpace(l) != `{"return": {}}` {
			t.Fatalf("qmp_capabilities answer %q, %v", l, err)
		}
		c.Write([]byte(`{"execute": "query-status"}` + "\n"))
		c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if l, err := r.ReadString('\n'); err == nil {
			t.Fatalf("query-status answered %q, want no answer", l)
		}
	})
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatalf("read %d bytes after the serving test ended, want the connection closed", n)
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the connection is still open after the serving test ended")
	}
}
