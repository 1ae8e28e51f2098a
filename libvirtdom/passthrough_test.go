package libvirtdom

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/netctl/netctl/qmp"
)

// TestPassthroughExecute: a QMP command goes to libvirt as one JSON
// object; QEMU's "return" comes back as Execute's value and its "error"
// as a *qmp.Error (so callers tell CommandNotFound and DeviceNotFound
// apart as over a socket); Used says the domain was tainted.
func TestPassthroughExecute(t *testing.T) {
	var sent []string
	reply := `{"return": {"num-vqs": 3}, "id": "libvirt-12"}`
	p := &Passthrough{Domain: "d", send: func(_ context.Context, cmd string) ([]byte, error) {
		sent = append(sent, cmd)
		return []byte(reply), nil
	}}
	if p.Used() {
		t.Fatal("Used before any command")
	}
	raw, err := p.Execute(context.Background(), "x-query-virtio-status", map[string]string{"path": "/machine/peripheral/net0/virtio-backend"})
	if err != nil || string(raw) != `{"num-vqs": 3}` {
		t.Fatalf("Execute = %s, %v", raw, err)
	}
	if sent[0] != `{"execute":"x-query-virtio-status","arguments":{"path":"/machine/peripheral/net0/virtio-backend"}}` {
		t.Errorf("sent %s", sent[0])
	}
	if !p.Used() {
		t.Error("Used after a command: false")
	}
	var out struct {
		N int `json:"num-vqs"`
	}
	if err := p.Run(context.Background(), "x", nil, &out); err != nil || out.N != 3 || sent[1] != `{"execute":"x"}` {
		t.Errorf("Run: %v %+v, sent %s", err, out, sent[1])
	}
	reply = `{"id": "libvirt-13", "error": {"class": "CommandNotFound", "desc": "The command x-query-virtio has not been found"}}`
	_, err = p.Execute(context.Background(), "x-query-virtio", nil)
	var qe *qmp.Error
	if !errors.As(err, &qe) || qe.Class != "CommandNotFound" || qe.Command != "x-query-virtio" {
		t.Errorf("an error reply: %v (want *qmp.Error CommandNotFound)", err)
	}
	for _, bad := range []string{``, `[]`, `{"id": 1}`, `{"return": 1, "error": {"class": "x"}}`, strings.Repeat("[", 100)} {
		reply = bad
		if _, err := p.Execute(context.Background(), "x", nil); err == nil || errors.As(err, &qe) {
			t.Errorf("reply %q: %v (want a malformed-reply error)", bad, err)
		}
	}
	p.send = func(context.Context, string) ([]byte, error) { return nil, errors.New("libvirt down") }
	if _, err := p.Execute(context.Background(), "x", nil); err == nil || !strings.Contains(err.Error(), "libvirt down") {
		t.Errorf("libvirt's error: %v", err)
	}
}
