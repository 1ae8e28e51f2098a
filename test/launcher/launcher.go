// Package launcher plays virt-launcher's side of KubeVirt's hook sidecar
// API for netctl's tests, as kubevirt/kubevirt pkg/hooks/manager.go (at
// d923fdb815) does it, with a gRPC client generated from the same protos:
// scan each subdirectory of the hook socket directory, dial every socket
// (2 s, authority localhost, insecure), ask Info with a 1 s deadline
// (an error is fatal), pick v1alpha3, then call OnDefineDomain with a
// 1 minute deadline.
package launcher

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/netctl/netctl/kubevirt/hooks/info"
	"github.com/netctl/netctl/kubevirt/hooks/v1alpha3"
)

// Hook is one sidecar virt-launcher collected.
type Hook struct {
	Socket string
	Info   *info.InfoResult
}

// dial connects as pkg/util/net/grpc DialSocketWithTimeout does.
func dial(ctx context.Context, sock string) (*grpc.ClientConn, error) {
	c, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority("localhost"))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c.Connect()
	for s := c.GetState(); s.String() != "READY"; s = c.GetState() {
		if !c.WaitForStateChange(ctx, s) {
			c.Close()
			return nil, fmt.Errorf("dial %s: %w", sock, ctx.Err())
		}
	}
	return c, nil
}

// Collect waits up to timeout for want sockets under dir (each in a
// subdirectory, as each sidecar container mounts its own), polling every
// 300 ms, and asks each its Info with a 1 s deadline.
func Collect(ctx context.Context, dir string, want int, timeout time.Duration) ([]Hook, error) {
	deadline := time.Now().Add(timeout)
	done := map[string]bool{}
	var hooks []Hook
	for {
		subs, err := os.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		for _, sub := range subs {
			if !sub.IsDir() {
				continue
			}
			files, err := os.ReadDir(filepath.Join(dir, sub.Name()))
			if err != nil {
				return nil, err
			}
			for _, f := range files {
				if f.IsDir() || done[f.Name()] {
					continue
				}
				sock := filepath.Join(dir, sub.Name(), f.Name())
				c, err := dial(ctx, sock)
				if err != nil {
					continue // not ready yet
				}
				ictx, cancel := context.WithTimeout(ctx, time.Second)
				res, err := info.NewInfoClient(c).Info(ictx, &info.InfoParams{})
				cancel()
				c.Close()
				if err != nil {
					return nil, fmt.Errorf("the Info call to %s: %w", sock, err)
				}
				if !slices.Contains(res.GetVersions(), "v1alpha3") {
					return nil, fmt.Errorf("hook sidecar %s does not expose a supported version: %v", sock, res.GetVersions())
				}
				done[f.Name()] = true
				hooks = append(hooks, Hook{Socket: sock, Info: res})
			}
		}
		if len(hooks) >= want {
			return hooks, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("failed to collect all expected sidecar hook sockets within given timeout: %d of %d", len(hooks), want)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// Subscribed says whether the hook listed hook point name.
func (h Hook) Subscribed(name string) bool {
	return slices.ContainsFunc(h.Info.GetHookPoints(), func(p *info.HookPoint) bool { return p.GetName() == name })
}

// callbacks dials the hook afresh, as virt-launcher does for each call.
func (h Hook) callbacks(ctx context.Context) (v1alpha3.CallbacksClient, func(), error) {
	c, err := dial(ctx, h.Socket)
	if err != nil {
		return nil, nil, err
	}
	return v1alpha3.NewCallbacksClient(c), func() { c.Close() }, nil
}

// OnDefineDomain sends the domain XML and the VMI JSON with a 1 minute
// deadline and returns the domain XML that replaces it.
func (h Hook) OnDefineDomain(ctx context.Context, domainXML, vmi []byte) ([]byte, error) {
	cb, closeFn, err := h.callbacks(ctx)
	if err != nil {
		return nil, err
	}
	defer closeFn()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	res, err := cb.OnDefineDomain(ctx, &v1alpha3.OnDefineDomainParams{DomainXML: domainXML, Vmi: vmi})
	if err != nil {
		return nil, err
	}
	return res.GetDomainXML(), nil
}

// PreCloudInitIso sends cloud-init data and returns the hook's.
func (h Hook) PreCloudInitIso(ctx context.Context, data, vmi []byte) ([]byte, error) {
	cb, closeFn, err := h.callbacks(ctx)
	if err != nil {
		return nil, err
	}
	defer closeFn()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	res, err := cb.PreCloudInitIso(ctx, &v1alpha3.PreCloudInitIsoParams{CloudInitData: data, Vmi: vmi})
	if err != nil {
		return nil, err
	}
	return res.GetCloudInitData(), nil
}

// Shutdown calls Shutdown with a 1 minute deadline.
func (h Hook) Shutdown(ctx context.Context) error {
	cb, closeFn, err := h.callbacks(ctx)
	if err != nil {
		return err
	}
	defer closeFn()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err = cb.Shutdown(ctx, &v1alpha3.ShutdownParams{})
	return err
}

// PreCloudInitIsoChain runs PreCloudInitIso as virt-launcher's hook
// manager does (pkg/hooks/manager.go PreCloudInitIso): the hooks that
// subscribed to it, in collection order, but the first one's answer is
// returned at once, so only that one is ever called. Without a
// subscriber the data comes back as it was.
func PreCloudInitIsoChain(ctx context.Context, hooks []Hook, data, vmi []byte) ([]byte, error) {
	for _, h := range hooks {
		if h.Subscribed("PreCloudInitIso") {
			return h.PreCloudInitIso(ctx, data, vmi)
		}
	}
	return data, nil
}
