package libvirtdom

import (
	"context"
	"fmt"
	"net"
	"sync"

	"github.com/netctl/netctl/internal/errs"
)

// Client is the libvirt RPC client a Conn speaks through: one method per
// remote procedure netctl calls, in libvirtdom's own types. The
// implementation (libvirtdom/rpc, over github.com/digitalocean/go-libvirt)
// registers itself with RegisterClient when a program imports it; libvirtdom
// does not import it, so that a program that links libvirtdom but never
// dials libvirt (the split netctl: docs/design.md, "Two binaries") does not
// link go-libvirt and, through it, golang.org/x/crypto/ssh and crypto/tls.
//
// A method's error is an Error when the daemon answered with one; any other
// error (the connection lost) leaves the outcome unknown.
type Client interface {
	ConnectToURI(uri string) error // virConnectOpen
	Disconnect() error             // virConnectClose
	ConnectGetVersion() (uint64, error)
	DomainLookupByUUID(uuid [16]byte) (DomainRef, error)
	DomainLookupByName(name string) (DomainRef, error)
	DomainGetState(d DomainRef) (DomainState, error)
	DomainIsPersistent(d DomainRef) (bool, error)
	DomainGetXMLDesc(d DomainRef, flags XMLFlags) (string, error)
	DomainDefineXMLFlags(xml string, flags DefineFlags) (DomainRef, error)
	DomainAttachDeviceFlags(d DomainRef, xml string, m Modify) error
	DomainDetachDeviceFlags(d DomainRef, xml string, m Modify) error
	// SubscribeDeviceRemoval registers for the domain's device-removed
	// (failed false) or device-removal-failed (failed true) events until
	// ctx ends; the channel is closed then.
	SubscribeDeviceRemoval(ctx context.Context, d DomainRef, failed bool) (<-chan DeviceEvent, error)
	QEMUDomainMonitorCommand(d DomainRef, cmd string) (string, error)
	DomainInterfaceStats(d DomainRef, dev string) (IfaceStats, error)
}

// DomainRef is a domain as libvirt's RPC names it (remote_nonnull_domain).
type DomainRef struct {
	Name string
	UUID [16]byte
	ID   int32
}

// DeviceEvent is one device-removed or device-removal-failed event.
type DeviceEvent struct {
	Alias  string // libvirt's <alias name> of the device
	Failed bool   // device-removal-failed: the guest refused
}

// DomainState is virDomainState.
type DomainState int32

// libvirt's virDomainState values (include/libvirt/libvirt-domain.h).
const (
	DomainNostate  DomainState = 0
	DomainRunning  DomainState = 1
	DomainBlocked  DomainState = 2
	DomainPaused   DomainState = 3
	DomainShutdown DomainState = 4
	DomainShutoff  DomainState = 5
	DomainCrashed  DomainState = 6
)

// XMLFlags are virDomainXMLFlags.
type XMLFlags uint32

const (
	XMLSecure   XMLFlags = 1 // VIR_DOMAIN_XML_SECURE
	XMLInactive XMLFlags = 2 // VIR_DOMAIN_XML_INACTIVE
)

// DefineFlags are virDomainDefineFlags.
type DefineFlags uint32

// DefineValidate is VIR_DOMAIN_DEFINE_VALIDATE.
const DefineValidate DefineFlags = 1

// libvirt's virErrorNumber values netctl maps onto its sentinels
// (include/libvirt/virterror.h).
const (
	ErrCodeNoSupport        = 3  // VIR_ERR_NO_SUPPORT
	ErrCodeNoDomain         = 42 // VIR_ERR_NO_DOMAIN
	ErrCodeOperationInvalid = 55 // VIR_ERR_OPERATION_INVALID
)

// Error is libvirt's error reply (virError): the daemon answered and
// refused. Err is the client library's own error value, if any, for As.
type Error struct {
	Code    uint32 // virErrorNumber
	Message string
	Err     error
}

// Error is Err's text when there is one (the client's own wording), else
// Message.
func (e Error) Error() string {
	if e.Err != nil {
		return e.Err.Error()
	}
	return e.Message
}

func (e Error) Unwrap() error { return e.Err }

// ErrNotLinked is Dial's error in a program that links no Client
// (import _ "github.com/netctl/netctl/libvirtdom/rpc" links one), after
// Unlinked, if set, did not take over.
var ErrNotLinked = fmt.Errorf("this program is built without libvirt's RPC client (link it: import _ \"github.com/netctl/netctl/libvirtdom/rpc\"): %w", errs.ErrNotSupported)

// Unlinked, if set, is called by Dial when no Client is registered,
// before anything is dialled: a program that leaves the client out runs
// one that has it in its place (the split netctl runs netctl-full). It
// returns only on failure; Dial returns its error.
var Unlinked func() error

var (
	clientMu  sync.Mutex // guards newClient
	newClient func(net.Conn) Client
)

// RegisterClient makes Dial speak through the Client newc makes over an
// already-connected socket (libvirtdom/rpc calls it from its init).
func RegisterClient(newc func(net.Conn) Client) {
	clientMu.Lock()
	defer clientMu.Unlock()
	newClient = newc
}

func registeredClient() func(net.Conn) Client {
	clientMu.Lock()
	defer clientMu.Unlock()
	return newClient
}

// notLinked is Dial's error when no Client is registered: Unlinked's,
// if it returned, else ErrNotLinked. Both match errors.Is(err, ErrNotLinked).
func notLinked(uri string) error {
	if Unlinked != nil {
		if err := Unlinked(); err != nil {
			return fmt.Errorf("libvirt %s: %w", uri, unlinkedError{err})
		}
	}
	return fmt.Errorf("libvirt %s: %w", uri, ErrNotLinked)
}

// unlinkedError is Unlinked's error, which is also ErrNotLinked.
type unlinkedError struct{ err error }

func (e unlinkedError) Error() string { return e.err.Error() }

func (e unlinkedError) Unwrap() []error { return []error{e.err, ErrNotLinked} }

// Linked says whether a Client is registered: Dial can speak to libvirt
// in this program.
func Linked() bool { return registeredClient() != nil }
