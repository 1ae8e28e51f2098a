// Package sidecar serves KubeVirt's hook sidecar gRPC API
// (kubevirt.hooks.info.Info and kubevirt.hooks.v1alpha3.Callbacks, from
// KubeVirt's own protos in kubevirt/hooks) for netctl's network binding
// plugin: virt-launcher finds the one socket in the sidecar's socket
// directory, asks Info (1 s), then calls OnDefineDomain, whose answer is
// kubevirt.DefineDomain's rewrite.
package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/kubevirt"
	"github.com/netctl/netctl/kubevirt/hooks/info"
	"github.com/netctl/netctl/kubevirt/hooks/v1alpha3"
)

// Name is the hook's name in Info (KubeVirt's own binding sidecars call
// themselves network-<binding>-binding).
const Name = "network-netctl-binding"

// Version is the only Callbacks version netctl serves (pkg/hooks/v1alpha3:
// the first virt-launcher looks for).
const Version = "v1alpha3"

// Hook point names (pkg/hooks/info/info.go).
const (
	OnDefineDomainHookPointName  = "OnDefineDomain"
	PreCloudInitIsoHookPointName = "PreCloudInitIso"
	ShutdownHookPointName        = "Shutdown"
)

// Server answers virt-launcher.
type Server struct {
	info.UnimplementedInfoServer
	v1alpha3.UnimplementedCallbacksServer

	Config kubevirt.Config
	// NetworkInfoPath is the network-info file ("" is
	// kubevirt.NetworkInfoPath); a missing file is a binding without
	// downwardAPI: device-info.
	NetworkInfoPath string
	// NetworkInfoWait bounds the wait for an empty network-info file to
	// be filled (0: one second, as KubeVirt's vdpa sidecar waits).
	NetworkInfoWait time.Duration
	// Log gets one JSON line per call (nil: discarded).
	Log io.Writer

	once sync.Once
	done chan struct{}
	mu   sync.Mutex
}

// Done is closed when virt-launcher called Shutdown.
func (s *Server) Done() <-chan struct{} {
	s.once.Do(func() { s.done = make(chan struct{}) })
	return s.done
}

// Info says what the sidecar serves: v1alpha3, at OnDefineDomain and
// Shutdown (as KubeVirt's passt binding sidecar). Not PreCloudInitIso:
// virt-launcher calls only the first sidecar subscribed to it and keeps
// its answer (pkg/hooks/manager.go), so netctl's echo would hide another
// sidecar's cloud-init rewrite.
func (s *Server) Info(context.Context, *info.InfoParams) (*info.InfoResult, error) {
	return &info.InfoResult{
		Name:     Name,
		Versions: []string{Version},
		HookPoints: []*info.HookPoint{
			{Name: OnDefineDomainHookPointName},
			{Name: ShutdownHookPointName},
		},
	}, nil
}

// OnDefineDomain rewrites the domain for the VMI's interfaces of the
// binding (kubevirt.DefineDomain). A refusal is InvalidArgument with
// DefineDomain's message: virt-launcher then fails the VM start with it.
func (s *Server) OnDefineDomain(ctx context.Context, p *v1alpha3.OnDefineDomainParams) (*v1alpha3.OnDefineDomainResult, error) {
	ni, err := s.networkInfo(ctx)
	if err != nil {
		s.log("OnDefineDomain", nil, err)
		return nil, status.Error(codes.Unavailable, "netctl: "+err.Error())
	}
	res, err := kubevirt.DefineDomain(kubevirt.Input{DomainXML: p.GetDomainXML(), VMI: p.GetVmi(), NetworkInfo: ni}, s.Config)
	s.log("OnDefineDomain", res.Interfaces, err)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, "netctl: "+err.Error())
	}
	return &v1alpha3.OnDefineDomainResult{DomainXML: res.DomainXML}, nil
}

// PreCloudInitIso gives the cloud-init data back as it came (Info does
// not subscribe to it; this answers a caller that asks anyway).
func (s *Server) PreCloudInitIso(_ context.Context, p *v1alpha3.PreCloudInitIsoParams) (*v1alpha3.PreCloudInitIsoResult, error) {
	return &v1alpha3.PreCloudInitIsoResult{CloudInitData: p.GetCloudInitData(), CloudInitNoCloudSource: p.GetCloudInitNoCloudSource()}, nil
}

// Shutdown ends Serve (gracefully: the answer to this call goes out).
func (s *Server) Shutdown(context.Context, *v1alpha3.ShutdownParams) (*v1alpha3.ShutdownResult, error) {
	s.log("Shutdown", nil, nil)
	s.Done()
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.done:
	default:
		close(s.done)
	}
	return &v1alpha3.ShutdownResult{}, nil
}

// networkInfo reads the network-info file, bounded. A missing file is
// nil; an empty one is waited for (KubeVirt writes the annotation after
// Multus reports the pod's networks) up to NetworkInfoWait, then nil.
func (s *Server) networkInfo(ctx context.Context) ([]byte, error) {
	path := s.NetworkInfoPath
	if path == "" {
		path = kubevirt.NetworkInfoPath
	}
	wait := s.NetworkInfoWait
	if wait <= 0 {
		wait = time.Second
	}
	deadline := time.Now().Add(wait)
	for {
		b, err := readBounded(path, kubevirt.MaxNetworkInfo)
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		if err != nil || len(b) > 0 || time.Now().After(deadline) {
			return b, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// readBounded reads the regular file at path, at most max bytes (more is
// an error wrapping errs.ErrInvalid).
func readBounded(path string, max int64) ([]byte, error) {
	// Stat before open: opening a device node or a FIFO has effects of
	// its own (a device's open, a blocked writer let go), and the
	// sidecar opens none. The downwardAPI file is a symlink into
	// ..data, so the link is followed; the fstat below catches a swap.
	if fi, err := os.Stat(path); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is no regular file: it is the pod's network-info (downwardAPI: device-info): %w", path, errs.ErrInvalid)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is no regular file: it is the pod's network-info (downwardAPI: device-info): %w", path, errs.ErrInvalid)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: over %d bytes: %w", path, max, errs.ErrInvalid)
	}
	return b, nil
}

// log writes one JSON line for a call.
func (s *Server) log(call string, ifaces []kubevirt.Rewritten, err error) {
	if s.Log == nil {
		return
	}
	l := struct {
		Time       string               `json:"time"`
		Call       string               `json:"call"`
		Interfaces []kubevirt.Rewritten `json:"interfaces,omitempty"`
		Error      string               `json:"error,omitempty"`
	}{Time: time.Now().UTC().Format(time.RFC3339Nano), Call: call, Interfaces: ifaces}
	if err != nil {
		l.Error = err.Error()
	}
	b, _ := json.Marshal(l)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Log.Write(append(b, '\n'))
}
