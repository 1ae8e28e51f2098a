package vhostuser

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
)

// TestHostQEMUFrontend: QEMU 7.2 (this host's) is the front-end. Its
// firmware (SeaBIOS, then iPXE from the NIC's option ROM, -boot n) opens
// the virtio-net NIC, so QEMU runs its whole vhost-user start: features,
// protocol features, queue count, memory slots, the memfd memory table,
// rings, kicks and enables. The bridge runs on a fake vhost-net (this host
// has none) and must accept every message and end with queue pair 0's
// rings attached. With NETCTL_VU_RECORD=1 the messages become FuzzDecode's
// seed corpus (testdata/fuzz/FuzzDecode/qemu-7.2-*).
func TestHostQEMUFrontend(t *testing.T) {
	testenv.Host(t)
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Fatalf("qemu-system-x86_64: %v (make vm-deps installs it)", err)
	}
	r := startBridgeUnserved(t, 2)
	var mu sync.Mutex
	var seen []*Message
	r.b.trace = func(m *Message) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, &Message{Header: m.Header, Payload: append([]byte(nil), m.Payload...), FDs: make([]int, len(m.FDs))})
	}
	r.serve(t)
	log := filepath.Join(t.TempDir(), "qemu.log")
	cmd := exec.Command(qemu, "-nodefaults", "-display", "none", "-machine", "pc,accel=tcg,memory-backend=mem", "-m", "64M",
		"-object", "memory-backend-memfd,id=mem,size=64M,share=on",
		"-chardev", "socket,id=vu,path="+r.path, "-netdev", "vhost-user,id=n0,chardev=vu,queues=2",
		"-device", "virtio-net-pci,netdev=n0,mq=on,mac=52:54:00:12:34:56", "-boot", "n", "-serial", "file:"+log)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
		if stderr.Len() > 0 {
			t.Logf("QEMU said: %s", stderr.String())
		}
	}()
	running := func() bool {
		d := r.k.dev(0)
		return d.vr[0].backend >= 0 && d.vr[1].backend >= 0
	}
	for end := time.Now().Add(3 * time.Minute); time.Now().Before(end) && !running(); time.Sleep(20 * time.Millisecond) {
		if cmd.ProcessState != nil {
			break
		}
	}
	if !running() {
		t.Fatalf("queue pair 0 never ran: status %+v", r.b.Status())
	}
	st := r.b.Status()
	if st.LastError != "" {
		t.Errorf("the bridge refused something QEMU sent: %s", st.LastError)
	}
	if st.FrontendPID != cmd.Process.Pid || st.MemoryRegions == 0 {
		t.Errorf("status %+v: want QEMU's pid %d and its memory", st, cmd.Process.Pid)
	}
	mu.Lock()
	defer mu.Unlock()
	var names []string
	for _, m := range seen {
		names = append(names, m.Request.String())
	}
	t.Logf("QEMU sent %d messages: %s", len(seen), strings.Join(names, " "))
	t.Logf("features %s (%v), protocol %s", st.Features, st.FeatureNames, st.ProtocolFeatures)
	if os.Getenv("NETCTL_VU_RECORD") == "1" {
		dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
		os.MkdirAll(dir, 0o755)
		for i, m := range seen {
			b := encodeSeed(m)
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("qemu-7.2-%02d-%s", i, strings.ToLower(m.Request.String()))), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
