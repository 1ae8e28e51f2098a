package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netctl/netctl/internal/testenv"
)

// TestHostVhostUserWithoutVhostNet: this host has no /dev/vhost-net, so
// netctl vhost-user fails with the fix in its message and leaves neither
// the tap it made nor the socket.
func TestHostVhostUserWithoutVhostNet(t *testing.T) {
	testenv.Host(t)
	if _, err := os.Stat("/dev/vhost-net"); err == nil {
		t.Fatal("this host has /dev/vhost-net; the test expects the development host, which has none")
	}
	sock := filepath.Join(t.TempDir(), "vu.sock")
	r := execAsNetctl(t, "vhost-user", "--socket", sock, "--tap", "vuhost0", "--queues", "2")
	if r.code != exitFailure || !strings.Contains(r.stderr, "modprobe vhost_net") {
		t.Fatalf("exit %d, stderr %q: want exit 1 and the modprobe hint", r.code, r.stderr)
	}
	if _, err := net.InterfaceByName("vuhost0"); err == nil {
		t.Error("the tap netctl created is still there")
	}
	if _, err := os.Lstat(sock); err == nil {
		t.Error("the socket was left")
	}
}
