// Package rpc is libvirtdom's Client over the pure-Go libvirt RPC client
// github.com/digitalocean/go-libvirt. Importing it (for its effect:
// import _ "github.com/netctl/netctl/libvirtdom/rpc") registers it, and
// libvirtdom.Dial then works; a program that does not import it does not
// link go-libvirt, golang.org/x/crypto/ssh or crypto/tls (go-libvirt's
// dialers import them), and libvirtdom.Dial fails with
// libvirtdom.ErrNotLinked (or runs libvirtdom.Unlinked).
package rpc

import (
	"context"
	"errors"
	"net"

	"github.com/digitalocean/go-libvirt"
	"github.com/digitalocean/go-libvirt/socket/dialers"

	"github.com/netctl/netctl/libvirtdom"
)

func init() {
	libvirtdom.RegisterClient(New)
}

// New is a Client over nc, a socket already connected to the daemon; the
// Client does not own nc before ConnectToURI (libvirtdom.Conn closes it).
func New(nc net.Conn) libvirtdom.Client {
	return client{libvirt.NewWithDialer(dialers.NewAlreadyConnected(nc))}
}

type client struct{ l *libvirt.Libvirt }

// wrap is err with libvirt's error reply as a libvirtdom.Error (keeping
// err, and with it the libvirt.Error, for errors.As).
func wrap(err error) error {
	var le libvirt.Error
	if err == nil || !errors.As(err, &le) {
		return err
	}
	return libvirtdom.Error{Code: le.Code, Message: le.Message, Err: err}
}

func dom(d libvirtdom.DomainRef) libvirt.Domain {
	return libvirt.Domain{Name: d.Name, UUID: d.UUID, ID: d.ID}
}

func ref(d libvirt.Domain, err error) (libvirtdom.DomainRef, error) {
	return libvirtdom.DomainRef{Name: d.Name, UUID: d.UUID, ID: d.ID}, wrap(err)
}

func (c client) ConnectToURI(uri string) error {
	return wrap(c.l.ConnectToURI(libvirt.ConnectURI(uri)))
}

func (c client) Disconnect() error { return wrap(c.l.Disconnect()) }

func (c client) ConnectGetVersion() (uint64, error) {
	v, err := c.l.ConnectGetVersion()
	return v, wrap(err)
}

func (c client) DomainLookupByUUID(u [16]byte) (libvirtdom.DomainRef, error) {
	return ref(c.l.DomainLookupByUUID(libvirt.UUID(u)))
}

func (c client) DomainLookupByName(name string) (libvirtdom.DomainRef, error) {
	return ref(c.l.DomainLookupByName(name))
}

func (c client) DomainGetState(d libvirtdom.DomainRef) (libvirtdom.DomainState, error) {
	st, _, err := c.l.DomainGetState(dom(d), 0)
	return libvirtdom.DomainState(st), wrap(err)
}

func (c client) DomainIsPersistent(d libvirtdom.DomainRef) (bool, error) {
	p, err := c.l.DomainIsPersistent(dom(d))
	return p == 1, wrap(err)
}

func (c client) DomainGetXMLDesc(d libvirtdom.DomainRef, flags libvirtdom.XMLFlags) (string, error) {
	s, err := c.l.DomainGetXMLDesc(dom(d), libvirt.DomainXMLFlags(flags))
	return s, wrap(err)
}

func (c client) DomainDefineXMLFlags(xml string, flags libvirtdom.DefineFlags) (libvirtdom.DomainRef, error) {
	return ref(c.l.DomainDefineXMLFlags(xml, libvirt.DomainDefineFlags(flags)))
}

func (c client) DomainAttachDeviceFlags(d libvirtdom.DomainRef, xml string, m libvirtdom.Modify) error {
	return wrap(c.l.DomainAttachDeviceFlags(dom(d), xml, uint32(m)))
}

func (c client) DomainDetachDeviceFlags(d libvirtdom.DomainRef, xml string, m libvirtdom.Modify) error {
	return wrap(c.l.DomainDetachDeviceFlags(dom(d), xml, uint32(m)))
}

func (c client) SubscribeDeviceRemoval(ctx context.Context, d libvirtdom.DomainRef, failed bool) (<-chan libvirtdom.DeviceEvent, error) {
	id := libvirt.DomainEventIDDeviceRemoved
	if failed {
		id = libvirt.DomainEventIDDeviceRemovalFailed
	}
	in, err := c.l.SubscribeEvents(ctx, id, []libvirt.Domain{dom(d)})
	if err != nil {
		return nil, wrap(err)
	}
	out := make(chan libvirtdom.DeviceEvent)
	go func() {
		defer close(out)
		for ev := range in {
			var e libvirtdom.DeviceEvent
			switch m := ev.(type) {
			case *libvirt.DomainEventCallbackDeviceRemovedMsg:
				e.Alias = m.Msg.DevAlias
			case *libvirt.DomainEventCallbackDeviceRemovalFailedMsg:
				e.Alias, e.Failed = m.DevAlias, true
			default:
				continue
			}
			// The reader (libvirtdom.Removal) reads until in is closed,
			// which ctx's end does.
			out <- e
		}
	}()
	return out, nil
}

func (c client) QEMUDomainMonitorCommand(d libvirtdom.DomainRef, cmd string) (string, error) {
	s, err := c.l.QEMUDomainMonitorCommand(dom(d), cmd, 0)
	return s, wrap(err)
}

func (c client) DomainInterfaceStats(d libvirtdom.DomainRef, dev string) (libvirtdom.IfaceStats, error) {
	var s libvirtdom.IfaceStats
	var err error
	s.RxBytes, s.RxPackets, s.RxErrs, s.RxDrop, s.TxBytes, s.TxPackets, s.TxErrs, s.TxDrop, err = c.l.DomainInterfaceStats(dom(d), dev)
	return s, wrap(err)
}
