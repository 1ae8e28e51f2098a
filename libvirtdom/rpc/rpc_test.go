package rpc

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/digitalocean/go-libvirt"

	"github.com/netctl/netctl/libvirtdom"
)

// TestConstants: libvirtdom's copies of libvirt's numbers are go-libvirt's.
func TestConstants(t *testing.T) {
	for _, c := range []struct {
		name      string
		ours, lib int64
	}{
		{"Live", int64(libvirtdom.Live), int64(libvirt.DomainDeviceModifyLive)},
		{"Config", int64(libvirtdom.Config), int64(libvirt.DomainDeviceModifyConfig)},
		{"XMLSecure", int64(libvirtdom.XMLSecure), int64(libvirt.DomainXMLSecure)},
		{"XMLInactive", int64(libvirtdom.XMLInactive), int64(libvirt.DomainXMLInactive)},
		{"DefineValidate", int64(libvirtdom.DefineValidate), int64(libvirt.DomainDefineValidate)},
		{"DomainNostate", int64(libvirtdom.DomainNostate), int64(libvirt.DomainNostate)},
		{"DomainRunning", int64(libvirtdom.DomainRunning), int64(libvirt.DomainRunning)},
		{"DomainBlocked", int64(libvirtdom.DomainBlocked), int64(libvirt.DomainBlocked)},
		{"DomainPaused", int64(libvirtdom.DomainPaused), int64(libvirt.DomainPaused)},
		{"DomainShutdown", int64(libvirtdom.DomainShutdown), int64(libvirt.DomainShutdown)},
		{"DomainShutoff", int64(libvirtdom.DomainShutoff), int64(libvirt.DomainShutoff)},
		{"DomainCrashed", int64(libvirtdom.DomainCrashed), int64(libvirt.DomainCrashed)},
		{"ErrCodeNoSupport", libvirtdom.ErrCodeNoSupport, int64(libvirt.ErrNoSupport)},
		{"ErrCodeNoDomain", libvirtdom.ErrCodeNoDomain, int64(libvirt.ErrNoDomain)},
		{"ErrCodeOperationInvalid", libvirtdom.ErrCodeOperationInvalid, int64(libvirt.ErrOperationInvalid)},
	} {
		if c.ours != c.lib {
			t.Errorf("%s = %d, go-libvirt's is %d", c.name, c.ours, c.lib)
		}
	}
}

// TestWrap: go-libvirt's error reply, also wrapped, becomes a
// libvirtdom.Error with its code and text, still As-able to libvirt.Error;
// any other error stays as it is.
func TestWrap(t *testing.T) {
	orig := fmt.Errorf("call: %w", libvirt.Error{Code: uint32(libvirt.ErrNoDomain), Message: "Domain not found"})
	err := wrap(orig)
	var e libvirtdom.Error
	var le libvirt.Error
	if !errors.As(err, &e) || e.Code != uint32(libvirt.ErrNoDomain) || e.Message != "Domain not found" || err.Error() != orig.Error() || !errors.As(err, &le) {
		t.Errorf("wrap(%v) = %#v", orig, err)
	}
	if !libvirtdom.Answered(err) {
		t.Error("not answered")
	}
	other := os.ErrClosed
	if wrap(other) != other || wrap(nil) != nil {
		t.Error("wrap changed an error that is not libvirt's")
	}
}

// TestRegistered: importing the package links the client.
func TestRegistered(t *testing.T) {
	if !libvirtdom.Linked() {
		t.Error("libvirtdom.Linked() is false with libvirtdom/rpc imported")
	}
}
