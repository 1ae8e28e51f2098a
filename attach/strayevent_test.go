package attach

import (
	"net"
	"path/filepath"
	"testing"
)

// TestDialSkipsStrayEvent: QEMU 7.2 can write the previous client's
// event (DEVICE_DELETED after a detach) to a new connection before its
// greeting (seen in TestHostAttachDetachCycles under -race: "not a QMP
// greeting"). dialQMP connects again instead of failing the attach.
func TestDialSkipsStrayEvent(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "qmp.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for i := 0; ; i++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if i == 0 {
				c.Write([]byte(`{"timestamp": {"seconds": 1, "microseconds": 2}, "event": "DEVICE_DELETED", "data": {"device": "w5n4", "path": "/machine/peripheral/w5n4"}}` + "\n"))
				c.Close()
				continue
			}
			c.Write([]byte(`{"QMP": {"version": {"qemu": {"micro": 0, "minor": 2, "major": 7}, "package": ""}, "capabilities": []}}` + "\n"))
			buf := make([]byte, 4096)
			n, _ := c.Read(buf)
			_ = n
			c.Write([]byte(`{"return": {}}` + "\n"))
			defer c.Close()
		}
	}()
	c, err := dialQMP(ctxT(t), sock)
	if err != nil {
		t.Fatalf("dialQMP with an event before the first greeting: %v", err)
	}
	c.Close()
}
