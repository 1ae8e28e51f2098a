package sidecar

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"libvirt.org/go/libvirtxml"

	"github.com/netctl/netctl/kubevirt"
	"github.com/netctl/netctl/kubevirt/hooks/info"
	"github.com/netctl/netctl/kubevirt/hooks/v1alpha3"
	"github.com/netctl/netctl/libvirtdom"
	"github.com/netctl/netctl/test/launcher"
)

func testdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// startSidecar serves s in dir/hook-sidecar-0 (the subdirectory a
// sidecar container sees as its socket directory) and returns the
// hooks root and Serve's result.
func startSidecar(t *testing.T, ctx context.Context, s *Server) (string, <-chan error) {
	t.Helper()
	root, err := os.MkdirTemp("", "kvhooks-") // short: a unix socket path has 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	dir := filepath.Join(root, "hook-sidecar-0")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, dir, s, func(string) { close(ready) }) }()
	select {
	case <-ready:
	case err := <-served:
		t.Fatalf("Serve: %v", err)
	}
	return root, served
}

// TestSidecarAsVirtLauncherSeesIt: a client generated from KubeVirt's
// protos plays virt-launcher (test/launcher, after pkg/hooks/manager.go):
// it finds the one socket in the sidecar's directory, Info answers within
// its 1 s deadline with v1alpha3, OnDefineDomain and Shutdown (not
// PreCloudInitIso: TestNetctlDoesNotShadowCloudInitHooks), OnDefineDomain
// with KubeVirt's fixture (tap attachment) and the VMI JSON returns the
// domain with <driver name='vhost' queues='4'> on ua-default and the
// <qemu:commandline> kept, PreCloudInitIso (asked anyway) echoes, and Shutdown ends
// Serve, which removes the socket.
func TestSidecarAsVirtLauncherSeesIt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var log bytes.Buffer
	s := &Server{NetworkInfoPath: filepath.Join(t.TempDir(), "no-network-info"), Log: &log}
	root, served := startSidecar(t, ctx, s)
	hooks, err := launcher.Collect(ctx, root, 1, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	h := hooks[0]
	if h.Info.GetName() != Name || len(h.Info.GetVersions()) != 1 || h.Info.GetVersions()[0] != "v1alpha3" ||
		!h.Subscribed("OnDefineDomain") || !h.Subscribed("Shutdown") || h.Subscribed("PreCloudInitIso") {
		t.Errorf("Info: %v", h.Info)
	}
	if filepath.Base(h.Socket) != SocketName {
		t.Errorf("socket %s", h.Socket)
	}
	out, err := h.OnDefineDomain(ctx, testdata(t, "domain-tap.xml"), testdata(t, "vmi.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d libvirtxml.Domain
	if err := d.Unmarshal(string(out)); err != nil {
		t.Fatalf("the answer does not parse: %v\n%s", err, out)
	}
	var x *libvirtxml.DomainInterface
	for i := range d.Devices.Interfaces {
		if libvirtdom.Alias(&d.Devices.Interfaces[i]) == "ua-default" {
			x = &d.Devices.Interfaces[i]
		}
	}
	if x == nil || x.Driver == nil || x.Driver.Name != "vhost" || x.Driver.Queues != 4 || x.Target == nil || x.Target.Dev != "tap37a8eec1ce1" {
		t.Errorf("the answer's interface: %+v\n%s", x, out)
	}
	if d.QEMUCommandline == nil || len(d.QEMUCommandline.Args) != 2 {
		t.Errorf("<qemu:commandline> lost")
	}
	ci := []byte(`{"userData":"#cloud-config\n"}`)
	if got, err := h.PreCloudInitIso(ctx, ci, testdata(t, "vmi.json")); err != nil || !bytes.Equal(got, ci) {
		t.Errorf("PreCloudInitIso: %q, %v", got, err)
	}
	if err := h.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Serve did not return after Shutdown")
	}
	if _, err := os.Lstat(h.Socket); !os.IsNotExist(err) {
		t.Errorf("the socket is left: %v", err)
	}
	if !strings.Contains(log.String(), `"call":"OnDefineDomain"`) || !strings.Contains(log.String(), `"driver_after"`) {
		t.Errorf("log:\n%s", log.String())
	}
}

// TestSidecarRefusalReachesVirtLauncher: a VMI whose netctl interface
// the domain lacks (no domainAttachmentType: tap) gets InvalidArgument
// with what to do, which virt-launcher turns into the VM's failure; the
// network-info file is read (vdpa) and an empty one is waited for only
// NetworkInfoWait.
func TestSidecarRefusalReachesVirtLauncher(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ni := filepath.Join(t.TempDir(), "network-info")
	if err := os.WriteFile(ni, []byte(`{"interfaces":[{"network":"default","deviceInfo":{"type":"vdpa","version":"1.1.0","vdpa":{"path":"/dev/vhost-vdpa-3"}}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &Server{NetworkInfoPath: ni}
	root, served := startSidecar(t, ctx, s)
	hooks, err := launcher.Collect(ctx, root, 1, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	dom := strings.Replace(string(testdata(t, "domain-tap.xml")), "ua-default", "ua-other", 1)
	_, err = hooks[0].OnDefineDomain(ctx, []byte(dom), testdata(t, "vmi.json"))
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "domainAttachmentType: tap") {
		t.Errorf("OnDefineDomain on a domain without ua-default: %v", err)
	}
	out, err := hooks[0].OnDefineDomain(ctx, testdata(t, "domain-tap.xml"), testdata(t, "vmi.json"))
	if err != nil || !strings.Contains(string(out), `<source dev="/dev/vhost-vdpa-3">`) {
		t.Errorf("vdpa from the network-info file: %v\n%s", err, out)
	}
	if err := os.WriteFile(ni, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s.NetworkInfoWait = 300 * time.Millisecond
	start := time.Now()
	out, err = hooks[0].OnDefineDomain(ctx, testdata(t, "domain-tap.xml"), testdata(t, "vmi.json"))
	if err != nil || !strings.Contains(string(out), `name="vhost"`) || time.Since(start) < 300*time.Millisecond {
		t.Errorf("an empty network-info: %v after %s\n%s", err, time.Since(start), out)
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}

// TestServeLeavesOthersFiles: a file at the socket's path that is no
// socket is not removed; a stale socket of an earlier run is replaced.
func TestServeLeavesOthersFiles(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, SocketName)
	if err := os.WriteFile(p, []byte("not mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Serve(context.Background(), dir, &Server{}, nil); err == nil || !strings.Contains(err.Error(), "no socket") {
		t.Errorf("Serve over a regular file: %v", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "not mine" {
		t.Errorf("the file was touched")
	}
}

// TestServeLeavesALiveSocket: a socket at the path that something still
// listens on (another sidecar serving the same directory) is not
// removed: Serve refuses and the other keeps its socket; a socket nobody
// listens on (an earlier run's) is replaced.
func TestServeLeavesALiveSocket(t *testing.T) {
	root, err := os.MkdirTemp("", "kvlive-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(root)
	p := filepath.Join(root, SocketName)
	l, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := Serve(ctx, root, &Server{}, nil); err == nil || !strings.Contains(err.Error(), "listens") {
		t.Errorf("Serve over a live socket: %v, want a refusal saying something listens on it", err)
	}
	if c, err := net.Dial("unix", p); err != nil {
		t.Errorf("the live socket was taken away: %v", err)
	} else {
		c.Close()
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close() // now stale: the file stays, nothing listens
	if _, err := os.Lstat(p); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, root, &Server{}, func(string) { close(ready) }) }()
	select {
	case <-ready:
	case err := <-served:
		t.Fatalf("Serve over a stale socket: %v", err)
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}

// TestTwoBindingsOneImage: two bindings registered with netctl's image
// (netctl and fastnet, each its own sidecar container and socket
// directory) in one virt-launcher pod are both collected: virt-launcher
// counts sockets by file name (pkg/hooks/manager.go processedSockets), so
// the two sockets must not share one.
func TestTwoBindingsOneImage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root, served0 := startSidecar(t, ctx, &Server{})
	dir1 := filepath.Join(root, "hook-sidecar-1")
	if err := os.Mkdir(dir1, 0o755); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	served1 := make(chan error, 1)
	go func() {
		served1 <- Serve(ctx, dir1, &Server{Config: kubevirt.Config{BindingName: "fastnet"}}, func(string) { close(ready) })
	}()
	select {
	case <-ready:
	case err := <-served1:
		t.Fatalf("Serve: %v", err)
	}
	hooks, err := launcher.Collect(ctx, root, 2, 3*time.Second)
	if err != nil {
		t.Errorf("virt-launcher's collection of two netctl sidecars: %v", err)
	} else if filepath.Base(hooks[0].Socket) == filepath.Base(hooks[1].Socket) {
		t.Errorf("sockets %s and %s", hooks[0].Socket, hooks[1].Socket)
	}
	cancel()
	<-served0
	<-served1
}

// TestSocketFor: a binding name becomes part of the socket name only when
// it is a plain file name; "../x", "a/b" and the like are hashed.
func TestSocketFor(t *testing.T) {
	for in, want := range map[string]string{"": "netctl.sock", "netctl": "netctl.sock", "fastnet": "netctl-fastnet.sock"} {
		if got := SocketFor(in); got != want {
			t.Errorf("SocketFor(%q) = %q, want %q", in, got, want)
		}
	}
	for _, in := range []string{"../x", "a/b", "..", ".hidden", strings.Repeat("x", 200), "a\x00b"} {
		got := SocketFor(in)
		if strings.ContainsAny(got, "/\x00") || len(got) > 80 || !strings.HasPrefix(got, "netctl-") || got == SocketFor("other") {
			t.Errorf("SocketFor(%q) = %q", in, got)
		}
	}
}

// TestNetworkInfoNotRegularIsNotOpened: a network-info path that is no
// regular file (here a FIFO; a device node alike) is refused without
// being opened: the sidecar opens no device or pipe. A writer blocked
// on the FIFO's other end stays blocked.
func TestNetworkInfoNotRegularIsNotOpened(t *testing.T) {
	p := filepath.Join(t.TempDir(), "network-info")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	opened := make(chan struct{})
	go func() {
		f, err := os.OpenFile(p, os.O_WRONLY, 0) // blocks until a reader opens it
		if err == nil {
			f.Close()
		}
		close(opened)
	}()
	time.Sleep(100 * time.Millisecond)
	s := &Server{NetworkInfoPath: p}
	if _, err := s.networkInfo(context.Background()); err == nil || !strings.Contains(err.Error(), "no regular file") {
		t.Errorf("a FIFO as network-info: %v", err)
	}
	select {
	case <-opened:
		t.Errorf("the sidecar opened the FIFO")
	case <-time.After(300 * time.Millisecond):
		// Release the writer.
		if f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			<-opened
			f.Close()
		}
	}
}

// TestConcurrentCallsAndShutdown: eight OnDefineDomain calls at once,
// with Shutdown racing them (twice), under the race detector: each call
// either gets the rewritten domain or a gRPC error (never a torn answer),
// both Shutdowns answer, and Serve returns and removes its socket.
func TestConcurrentCallsAndShutdown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var log bytes.Buffer
	root, served := startSidecar(t, ctx, &Server{NetworkInfoPath: filepath.Join(t.TempDir(), "none"), Log: &log})
	hooks, err := launcher.Collect(ctx, root, 1, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	dom, vmi := testdata(t, "domain-tap.xml"), testdata(t, "vmi.json")
	errc := make(chan error, 10)
	for i := 0; i < 8; i++ {
		go func() {
			out, err := hooks[0].OnDefineDomain(ctx, dom, vmi)
			switch {
			case err == nil && !strings.Contains(string(out), `<driver name="vhost" queues="4">`):
				err = errors.New("a torn answer: " + string(out))
			case status.Code(err) == codes.Unavailable || err != nil && strings.HasPrefix(err.Error(), "dial "):
				err = nil // the server stopped at Shutdown before this call
			}
			errc <- err
		}()
	}
	for i := 0; i < 2; i++ {
		go func() { errc <- hooks[0].Shutdown(ctx) }()
	}
	for i := 0; i < 10; i++ {
		if err := <-errc; err != nil && status.Code(err) != codes.Unavailable && !strings.HasPrefix(err.Error(), "dial ") {
			t.Error(err)
		}
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Serve did not return")
	}
	if _, err := os.Lstat(hooks[0].Socket); !os.IsNotExist(err) {
		t.Errorf("the socket is left: %v", err)
	}
}

// TestOversizedRequests: a domain XML over libvirtdom.MaxXML that still
// fits a gRPC message is InvalidArgument saying so; one over the
// message bound is ResourceExhausted from gRPC; either way the sidecar
// keeps serving the next call.
func TestOversizedRequests(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root, served := startSidecar(t, ctx, &Server{NetworkInfoPath: filepath.Join(t.TempDir(), "none")})
	hooks, err := launcher.Collect(ctx, root, 1, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	vmi := testdata(t, "vmi.json")
	if _, err := hooks[0].OnDefineDomain(ctx, make([]byte, libvirtdom.MaxXML+1), vmi); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "over") {
		t.Errorf("a domain over MaxXML: %v", err)
	}
	if _, err := hooks[0].OnDefineDomain(ctx, make([]byte, maxMessage+1), vmi); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a message over the bound: %v", err)
	}
	if out, err := hooks[0].OnDefineDomain(ctx, testdata(t, "domain-tap.xml"), vmi); err != nil || !strings.Contains(string(out), `name="vhost"`) {
		t.Errorf("the next call: %v", err)
	}
	cancel()
	<-served
}

// cloudInitHook is another hook sidecar (a user's, e.g. KubeVirt's
// sidecar-shim with a PreCloudInitIso script) that rewrites the
// cloud-init data.
type cloudInitHook struct {
	info.UnimplementedInfoServer
	v1alpha3.UnimplementedCallbacksServer
}

func (cloudInitHook) Info(context.Context, *info.InfoParams) (*info.InfoResult, error) {
	return &info.InfoResult{Name: "user-cloudinit", Versions: []string{"v1alpha3"}, HookPoints: []*info.HookPoint{{Name: PreCloudInitIsoHookPointName}}}, nil
}

func (cloudInitHook) PreCloudInitIso(_ context.Context, p *v1alpha3.PreCloudInitIsoParams) (*v1alpha3.PreCloudInitIsoResult, error) {
	return &v1alpha3.PreCloudInitIsoResult{CloudInitData: []byte(`{"userData":"#cloud-config\nhostname: rewritten\n"}`)}, nil
}

// TestNetctlDoesNotShadowCloudInitHooks: virt-launcher calls only the
// first sidecar subscribed to PreCloudInitIso and takes its answer
// (test/launcher.PreCloudInitIsoChain, after pkg/hooks/manager.go), so
// netctl's sidecar, collected first (hook-sidecar-0), must not subscribe
// to it: another sidecar's cloud-init rewrite (hook-sidecar-1) reaches
// the VM.
func TestNetctlDoesNotShadowCloudInitHooks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root, served := startSidecar(t, ctx, &Server{})
	dir1 := filepath.Join(root, "hook-sidecar-1")
	if err := os.Mkdir(dir1, 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(dir1, "user.sock"))
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	info.RegisterInfoServer(gs, cloudInitHook{})
	v1alpha3.RegisterCallbacksServer(gs, cloudInitHook{})
	go gs.Serve(l)
	defer gs.Stop()
	hooks, err := launcher.Collect(ctx, root, 2, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(filepath.Dir(hooks[0].Socket)) != "hook-sidecar-0" {
		t.Fatalf("collected %s first", hooks[0].Socket)
	}
	got, err := launcher.PreCloudInitIsoChain(ctx, hooks, []byte(`{"userData":"#cloud-config\n"}`), testdata(t, "vmi.json"))
	if err != nil || !strings.Contains(string(got), "hostname: rewritten") {
		t.Errorf("the cloud-init data virt-launcher keeps: %q, %v: the other sidecar's rewrite is lost", got, err)
	}
	cancel()
	<-served
}
