package hook

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestReconnectNeverFails: libvirt kills a running domain whose
// reconnect hook fails (libvirt's hooks documentation: "If the script
// fails, the existing QEMU process will be killed off"). A domain XML the
// hook now refuses (a domain started before an upgrade that refuses it,
// here two interfaces with the listed MAC), one that is not valid, or one
// for another domain, must not kill it: reconnect succeeds, touches
// nothing, and says why it did not rebuild the record.
func TestReconnectNeverFails(t *testing.T) {
	refused := []byte(`<domain type='qemu'><name>dup</name>
  <metadata><netctl:hook xmlns:netctl="http://netctl.dev/xmlns/hook/1"><netctl:interface mac="52:54:00:aa:00:01"/></netctl:hook></metadata>
  <devices>
    <interface type='ethernet'><mac address='52:54:00:aa:00:01'/><target dev='dup0' managed='no'/></interface>
    <interface type='ethernet'><mac address='52:54:00:aa:00:01'/><target dev='dup1' managed='no'/></interface>
  </devices></domain>`)
	for name, xml := range map[string][]byte{"refused": refused, "broken": []byte("<domain"), "other domain": bytes.ReplaceAll(refused, []byte("<name>dup<"), []byte("<name>other<"))} {
		t.Run(name, func(t *testing.T) {
			f := newFake(t)
			h, log, _ := newTestHook(t, f)
			before := f.snapshot()
			res, err := h.Run(context.Background(), "dup", "reconnect", "begin", bytes.NewReader(xml))
			if err != nil {
				t.Fatalf("reconnect: %v; libvirt would kill the running domain", err)
			}
			want := "record not rebuilt" // netctl's XML it refuses
			if name == "broken" {
				want = "passed by" // XML that names no netctl: not netctl's
			} else if len(res.Notes) != 1 || !strings.Contains(res.Notes[0], want) {
				t.Errorf("notes %q", res.Notes)
			}
			if !strings.Contains(log.String(), want) {
				t.Errorf("log:\n%s", log)
			}
			if f.snapshot() != before || len(f.calls) != 0 {
				t.Errorf("devices %s -> %s, calls %v", before, f.snapshot(), f.calls)
			}
		})
	}
}
