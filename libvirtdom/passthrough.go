package libvirtdom

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/qmp"
)

// Passthrough runs QMP commands on a domain's QEMU through libvirt
// (MonitorCommand, virDomainQemuMonitorCommand): what a *qmp.Client does
// over a socket netctl holds, for a domain whose monitor libvirt holds.
// Its Execute and Run behave as the qmp.Client's: QEMU's "return" value,
// or a *qmp.Error for QEMU's error reply. Every command TAINTS the domain
// ("tainted: custom-monitor" in libvirt's log, TaintNote): Used says
// whether one was sent, so the caller can tell the user.
type Passthrough struct {
	Domain string // the domain's name, for messages
	send   func(ctx context.Context, cmd string) ([]byte, error)
	used   atomic.Bool
}

// Passthrough is a QMP runner for domain d over c.
func (c *Conn) Passthrough(d Domain) *Passthrough {
	return &Passthrough{Domain: d.Name, send: func(ctx context.Context, cmd string) ([]byte, error) {
		r, err := c.MonitorCommand(ctx, d, cmd)
		return r.Reply, err
	}}
}

// Used says a command was passed through: libvirt has tainted the domain.
func (p *Passthrough) Used() bool { return p.used.Load() }

// Execute runs cmd with args (nil for none) and returns QEMU's "return"
// value; QEMU's error reply is a *qmp.Error.
func (p *Passthrough) Execute(ctx context.Context, cmd string, args any) (json.RawMessage, error) {
	msg := struct {
		Execute   string `json:"execute"`
		Arguments any    `json:"arguments,omitempty"`
	}{cmd, args}
	b, err := json.Marshal(msg)
	if err != nil {
		return nil, fmt.Errorf("QMP %s through libvirt: %w", cmd, err)
	}
	p.used.Store(true) // libvirt taints the domain as soon as it is asked
	out, err := p.send(ctx, string(b))
	if err != nil {
		return nil, err
	}
	return monitorReply(cmd, out)
}

// Run is Execute decoding the reply into out (which may be nil).
func (p *Passthrough) Run(ctx context.Context, cmd string, args, out any) error {
	raw, err := p.Execute(ctx, cmd, args)
	if err != nil || out == nil {
		return err
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("QMP %s through libvirt: decode the reply: %v: %w", cmd, err, errs.ErrInvalid)
	}
	return nil
}

// monitorReply reads QEMU's reply as libvirt hands it over (the whole
// QMP reply: {"return": ...} or {"error": {...}}, with libvirt's id).
func monitorReply(cmd string, b []byte) (json.RawMessage, error) {
	var r struct {
		Return json.RawMessage `json:"return"`
		Error  *qmp.Error      `json:"error"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("QMP %s through libvirt: the reply is not a QMP reply (%s): %w", cmd, clip(err.Error()), errs.ErrInvalid)
	}
	switch {
	case r.Error != nil && len(r.Return) == 0:
		r.Error.Command = cmd
		return nil, r.Error
	case r.Error == nil && len(bytes.TrimSpace(r.Return)) > 0:
		return r.Return, nil
	}
	return nil, fmt.Errorf("QMP %s through libvirt: a reply with neither or both of return and error: %w", cmd, errs.ErrInvalid)
}
