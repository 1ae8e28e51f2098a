package sidecar

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/internal/lazyre"
	"github.com/netctl/netctl/kubevirt"
	"github.com/netctl/netctl/kubevirt/hooks/info"
	"github.com/netctl/netctl/kubevirt/hooks/v1alpha3"
	"github.com/netctl/netctl/libvirtdom"
)

// SocketDir and SocketName are kubevirt's (the command line names them
// without importing gRPC).
const (
	SocketDir  = kubevirt.SocketDir
	SocketName = kubevirt.SocketName
)

// bindingSocketName is a binding name that may be part of a socket name.
var bindingSocketName = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)

// SocketFor is the socket name of the sidecar of binding (SocketName for
// "" and kubevirt.DefaultBindingName, else netctl-BINDING.sock, or a hash
// of a name unfit for a file name): virt-launcher counts the sockets it
// collected by file name alone (pkg/hooks/manager.go processedSockets),
// so two bindings served by netctl's image in one pod need two names.
func SocketFor(binding string) string {
	switch {
	case binding == "" || binding == kubevirt.DefaultBindingName:
		return SocketName
	case bindingSocketName.MatchString(binding):
		return "netctl-" + binding + ".sock"
	default:
		h := sha256.Sum256([]byte(binding))
		return "netctl-" + hex.EncodeToString(h[:8]) + ".sock"
	}
}

// maxMessage bounds a request: a domain XML and a VMI at their bounds.
const maxMessage = libvirtdom.MaxXML + kubevirt.MaxVMI + 64<<10

// stopGrace bounds a graceful stop; then open calls are cut.
const stopGrace = 10 * time.Second

// Serve listens on dir/SocketFor(s.Config.BindingName) and answers virt-launcher until ctx
// ends or virt-launcher calls Shutdown, then stops gracefully and removes
// the socket. ready, when not nil, is called once the socket listens. A
// socket left at that path by an earlier run of the sidecar is replaced;
// a socket something still listens on, or any other file there, is an
// error (netctl removes only its own, and only when nothing listens).
func Serve(ctx context.Context, dir string, s *Server, ready func(path string)) error {
	path := filepath.Join(dir, SocketFor(s.Config.BindingName))
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return fmt.Errorf("%s exists and is no socket: netctl does not remove it; the socket directory is the sidecar's own (virt-launcher dials every file in it): %w", path, errs.ErrInvalid)
		}
		if live(path) {
			return fmt.Errorf("something listens on %s: netctl does not take over a live socket; is another sidecar serving this directory? "+
				"(each sidecar container has its own socket directory): %w", path, errs.ErrInvalid)
		}
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("an earlier run's socket %s: %w", path, err)
		}
	}
	l, err := (&net.ListenConfig{}).Listen(ctx, "unix", path)
	if err != nil {
		return fmt.Errorf("listen on %s (the hook socket directory virt-launcher scans: --socket-dir): %w", path, err)
	}
	defer os.Remove(path)
	gs := grpc.NewServer(grpc.MaxRecvMsgSize(maxMessage), grpc.MaxSendMsgSize(libvirtdom.MaxXML+64<<10))
	info.RegisterInfoServer(gs, s)
	v1alpha3.RegisterCallbacksServer(gs, s)
	served := make(chan error, 1)
	go func() { served <- gs.Serve(l) }()
	if ready != nil {
		ready(path)
	}
	select {
	case err := <-served:
		if err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return fmt.Errorf("serving %s: %w", path, err)
		}
		return nil
	case <-ctx.Done():
	case <-s.Done():
	}
	stopped := make(chan struct{})
	go func() { gs.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(stopGrace):
		gs.Stop()
		<-stopped
	}
	return nil
}

// live says whether the unix socket at path may still be someone's: only
// a socket that refuses connections (ECONNREFUSED: nobody listens, an
// earlier run's) is not.
func live(path string) bool {
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return true
	}
	return !errors.Is(err, syscall.ECONNREFUSED)
}
