package libvirtdom

import (
	"context"
	"fmt"
)

// TaintNote is what MonitorCommand's result says about the domain.
const TaintNote = "libvirt marks the domain \"tainted: custom-monitor\" in its log after a QEMU monitor passthrough (virsh qemu-monitor-command): it no longer vouches for what QEMU holds"

// MonitorResult is QEMU's JSON reply to a passed-through QMP command.
type MonitorResult struct {
	Reply []byte
	// Tainted is always true: libvirt taints the domain with
	// custom-monitor at every passthrough (TaintNote).
	Tainted bool
}

// maxQMP bounds a QMP command and a reply.
const maxQMP = 1 << 20

// MonitorCommand passes the QMP command cmd (a JSON object such as
// {"execute":"query-status"}) to the domain's QEMU through libvirt
// (virDomainQemuMonitorCommand). Use it only for what libvirt itself does
// not report (e.g. the guest-acked virtio feature word): it TAINTS the
// domain ("tainted: custom-monitor" in libvirt's log for it), which the
// caller must tell the user (TaintNote).
func (c *Conn) MonitorCommand(ctx context.Context, d Domain, cmd string) (MonitorResult, error) {
	if len(cmd) > maxQMP {
		return MonitorResult{}, fmt.Errorf("QMP command of %d bytes, over %d", len(cmd), maxQMP)
	}
	var out string
	if err := c.do(ctx, "QEMU monitor command on "+d.Name+" (taints it: custom-monitor)", func() (err error) {
		out, err = c.l.QEMUDomainMonitorCommand(d.d, cmd)
		return
	}); err != nil {
		return MonitorResult{Tainted: true}, err
	}
	if len(out) > maxQMP {
		return MonitorResult{Tainted: true}, fmt.Errorf("libvirt %s: QEMU monitor reply of %d bytes, over %d", c.URI, len(out), maxQMP)
	}
	return MonitorResult{Reply: []byte(out), Tainted: true}, nil
}
