package stats

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/qemuproc"
)

// A fake QEMU in a process of its own (this test binary run again, its
// argv[0] a QEMU's): its QMP monitor answers as fakeVM's does, and its
// "guest memory" is a memfd this process shares, so that the test
// writes ring indices that the stats read from the child with
// process_vm_readv. Two of them on one memfd are a migration's source
// and destination: the guest's rings carried over, indices and all.

const fakeQEMUEnv = "NETCTL_STATS_FAKE_QEMU"

func TestMain(m *testing.M) {
	if os.Getenv(fakeQEMUEnv) == "1" {
		runFakeQEMU()
		return
	}
	os.Exit(m.Run())
}

// guestMemSize is the fake guest memory (what fakeVM maps).
const guestMemSize = ringBase + 64*ringStride

// runFakeQEMU is the child: fd 3 is the guest memory, the environment
// names the socket, the queue pairs, the UUID and a control file whose
// content "nodriver" makes the device's status not DRIVER_OK (an
// incoming migration still loading). It ends when stdin closes.
func runFakeQEMU() {
	mem, err := unix.Mmap(3, 0, guestMemSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		fmt.Println("mmap:", err)
		os.Exit(1)
	}
	pairs, _ := strconv.Atoi(os.Getenv("FAKE_PAIRS"))
	f := &fakeVM{sock: os.Getenv("FAKE_SOCK"), mem: mem, pairs: pairs, vhost: true, uuid: os.Getenv("FAKE_UUID"), ctl: os.Getenv("FAKE_CTL"),
		statuses: []string{"VIRTIO_CONFIG_S_ACKNOWLEDGE: x", "VIRTIO_CONFIG_S_DRIVER: x", "VIRTIO_CONFIG_S_FEATURES_OK: x", "VIRTIO_CONFIG_S_DRIVER_OK: x"}}
	ln, err := net.Listen("unix", f.sock)
	if err != nil {
		fmt.Println("listen:", err)
		os.Exit(1)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go f.serve(c)
		}
	}()
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	ln.Close()
	os.Exit(0)
}

// fakeGuest is guest memory shared by fake QEMU processes.
type fakeGuest struct {
	fd  *os.File
	mem []byte
}

func newFakeGuest(t *testing.T) *fakeGuest {
	fd, err := unix.MemfdCreate("fakeguest", 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "fakeguest")
	t.Cleanup(func() { f.Close() })
	if err := f.Truncate(guestMemSize); err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(fd, 0, guestMemSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	return &fakeGuest{fd: f, mem: mem}
}

// setIdx writes queue q's avail and used indices (generation 0's rings).
func (g *fakeGuest) setIdx(q int, avail, used uint16) {
	binary.LittleEndian.PutUint16(g.mem[availGPA(0, q)+2:], avail)
	binary.LittleEndian.PutUint16(g.mem[usedGPA(0, q)+2:], used)
}

// fakeQEMUProc is one fake QEMU process.
type fakeQEMUProc struct {
	sock, ctl string
	pid       int
	start     uint64
	pairs     int
	stdin     io.WriteCloser
	cmd       *exec.Cmd
}

// startFakeQEMU starts a fake QEMU on g's memory with the given UUID
// ("" for none: it answers QEMU's nil UUID); incoming puts -incoming
// on its command line (a migration's destination).
func startFakeQEMU(t *testing.T, g *fakeGuest, pairs int, uuid string, incoming bool) *fakeQEMUProc {
	t.Helper()
	dir := t.TempDir()
	p := &fakeQEMUProc{sock: filepath.Join(dir, "qmp.sock"), ctl: filepath.Join(dir, "ctl"), pairs: pairs}
	args := []string{"qemu-system-x86_64", "-test.run=^$", "--", "-name", "fake"}
	if incoming {
		args = append(args, "-incoming", "defer")
	}
	if uuid != "" {
		args = append(args, "-uuid", uuid)
	}
	p.cmd = &exec.Cmd{Path: os.Args[0], Args: args, ExtraFiles: []*os.File{g.fd},
		Env: append(os.Environ(), fakeQEMUEnv+"=1", "FAKE_SOCK="+p.sock, "FAKE_PAIRS="+strconv.Itoa(pairs), "FAKE_UUID="+uuid, "FAKE_CTL="+p.ctl)}
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = os.Stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.stop)
	line, _ := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		t.Fatalf("fake QEMU: %q", line)
	}
	p.pid = p.cmd.Process.Pid
	if p.start, err = qemuproc.StartTime(p.pid); err != nil {
		t.Fatal(err)
	}
	return p
}

// stop ends the fake QEMU and reaps it (idempotent).
func (p *fakeQEMUProc) stop() {
	if p.stdin != nil {
		p.stdin.Close()
		p.cmd.Wait()
		p.stdin = nil
	}
}

// setDriver sets whether the device's status has DRIVER_OK.
func (p *fakeQEMUProc) setDriver(t *testing.T, ok bool) {
	t.Helper()
	v := ""
	if !ok {
		v = "nodriver"
	}
	if err := os.WriteFile(p.ctl, []byte(v), 0o600); err != nil {
		t.Fatal(err)
	}
}

// target is the fake QEMU's NIC as netctl's record names it.
func (p *fakeQEMUProc) target() Target {
	return Target{VM: "fake", NIC: "net0", QMP: p.sock, PID: p.pid, PIDStart: p.start, Backend: policy.BackendVhostNet,
		NetdevType: "tap", QueuePairs: p.pairs}
}
