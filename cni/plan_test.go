package cni

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"golang.org/x/sys/unix"
)

// TestLoadPlanFile: the "plan" file is read only when it is a regular
// file that only root (or netctl's own user) can write: a FIFO (whose
// open would block ADD and DEL until the runtime kills the plugin), a
// device, and a file that others can write (which would let anyone on
// the node steer the pool's decision) are refused at once with a
// message saying what to fix; a symlink to a good file (a ConfigMap's
// mount) is read.
func TestLoadPlanFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "pool.json")
	if err := os.WriteFile(good, []byte(`{"hosts":["node1"],"offer":["VIRTIO_NET_F_CSUM"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.json")
	os.Symlink(good, link)
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	ww := filepath.Join(dir, "ww.json")
	os.WriteFile(ww, []byte(`{"hosts":["node1"],"offer":["VIRTIO_NET_F_CSUM"]}`), 0o644)
	os.Chmod(ww, 0o666)
	load := func(plan string) error {
		p := &Plugin{}
		done := make(chan error, 1)
		go func() {
			_, err := p.load(&skel.CmdArgs{IfName: "eth0", StdinData: []byte(`{"cniVersion":"1.1.0","name":"n","type":"netctl","plan":"` + plan + `"}`)})
			done <- err
		}()
		select {
		case err := <-done:
			return err
		case <-time.After(3 * time.Second):
			if fd, err := unix.Open(fifo, unix.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
				unix.Close(fd)
			}
			<-done
			return errors.New("blocked for 3s")
		}
	}
	for _, p := range []string{good, link} {
		if err := load(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	bad := map[string]string{fifo: "not a regular file", ww: "others can write"}
	// A device (made here: /dev/null may be anything on a shared machine).
	if dev := filepath.Join(dir, "null"); unix.Mknod(dev, unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))) == nil {
		bad[dev] = "not a regular file"
	}
	for p, want := range bad {
		err := load(p)
		var ce *ConfigError
		if !errors.As(err, &ce) || !strings.Contains(ce.Msg, want) {
			t.Errorf("%s: %v; want a ConfigError saying %q", p, err, want)
		}
	}
}
