package vufront

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/test/vhostrig/hostside"
	"github.com/netctl/netctl/vhostnet/guest"
	"github.com/netctl/netctl/virtio"
)

// treeNetctl is bin/netctl of this tree (make build).
func treeNetctl(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(filepath.Dir(filepath.Dir(wd)), "bin", "netctl") // test/vufront
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s: %v: run make build first (a static netctl, CGO_ENABLED=0)", p, err)
	}
	return p
}

// bridgeProcess is a running `netctl vhost-user`.
type bridgeProcess struct {
	cmd    *exec.Cmd
	stderr *bytes.Buffer
}

func startBridgeProcess(t *testing.T, netctl, socket, tap string) *bridgeProcess {
	t.Helper()
	p := &bridgeProcess{stderr: &bytes.Buffer{}}
	p.cmd = exec.Command(netctl, "vhost-user", "--socket", socket, "--tap", tap)
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return p
}

// processRestart: the bridge as users run it, `netctl vhost-user --tap`
// on a persistent tap, killed with SIGKILL while a frontend is connected
// and traffic flows (the kernel closes its vhost-net fds and the
// frontend's connection), then started again on the stale socket: the
// frontend reconnects, repeats the handshake on its rings, and the frame
// it queued meanwhile and new traffic go through. SIGTERM then stops the
// bridge with exit 0 and removes the socket; the tap, which it did not
// create, stays.
func processRestart(t *testing.T) {
	netctl := treeNetctl(t)
	tap, err := macvtap.CreateTap(macvtap.TapConfig{Name: "vupr%d", VnetHdr: true, VnetHdrSize: 12, Persistent: true})
	if err != nil {
		t.Fatal(err)
	}
	name := tap.Name()
	tap.Close() // the bridge attaches the tap's only queue
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := macvtap.DeleteLinkIfSame(name, ifi.Index); err != nil {
			t.Errorf("delete tap %s: %v", name, err)
		}
	}()
	hostside.Up(t, name)
	r := &bridgeRig{t: t, host: hostside.New(t, ifi.Index), socket: filepath.Join(t.TempDir(), "vu.sock")}
	p := startBridgeProcess(t, netctl, r.socket, name)
	defer func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			p.cmd.Wait()
		}
		if t.Failed() {
			t.Logf("netctl vhost-user stderr: %s", p.stderr)
		}
	}()
	f := r.connect(1, Config{})
	r.guestToHost(f, 0, 0)
	r.hostToGuest(f, 0, 1)

	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.cmd.Wait()
	want := guest.IPv4Frame(17, guest.GuestIP, guest.HostIP, 4000, 5996, guest.Pattern(200, 66), false)
	if err := f.Send(0, guest.NetHdr{}, want); err != nil {
		t.Fatal(err)
	}
	if got := r.host.Recv(300*time.Millisecond, hostside.From(guest.GuestIP)); got != nil {
		t.Fatal("a frame went out with the bridge process dead")
	}
	if _, err := os.Lstat(r.socket); err != nil {
		t.Logf("after SIGKILL the socket is gone (%v)", err)
	}
	p = startBridgeProcess(t, netctl, r.socket, name)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := f.Reconnect(ctx, wantFeatures, virtio.Version1|virtio.NetMrgRxbuf, WantProtocol); err != nil {
		t.Fatal(err)
	}
	if got := r.host.Recv(5*time.Second, hostside.From(guest.GuestIP)); !bytes.Equal(got, want) {
		t.Fatalf("after the bridge process restarted: the host got %d bytes, want the frame queued meanwhile", len(got))
	}
	for i := 2; i < 6; i++ {
		r.guestToHost(f, 0, i)
		r.hostToGuest(f, 0, i)
	}
	f.Close()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Wait(); err != nil {
		t.Errorf("netctl vhost-user after SIGTERM: %v (stderr %s)", err, p.stderr)
	}
	if _, err := os.Lstat(r.socket); err == nil {
		t.Errorf("the socket %s is still there after SIGTERM", r.socket)
	}
	if _, err := net.InterfaceByName(name); err != nil {
		t.Errorf("tap %s, which the bridge did not create, is gone: %v", name, err)
	}
	if s := p.stderr.String(); strings.Contains(s, "panic") {
		t.Errorf("netctl vhost-user: %s", s)
	}
}
