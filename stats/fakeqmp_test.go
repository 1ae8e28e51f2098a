package stats

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
)

const greeting72 = `{"QMP": {"version": {"qemu": {"micro": 22, "minor": 2, "major": 7}, "package": "Debian 1:7.2+dfsg-7+deb12u18+b3"}, "capabilities": ["oob"]}}`

// fakeVM is a fake QEMU in this process: a QMP monitor on a unix socket
// answering the commands the rings source asks, with its "guest memory"
// an anonymous mapping of this process, so that process_vm_readv on this
// process reads the indices the test writes there.
type fakeVM struct {
	t    testing.TB
	sock string
	mem  []byte // guest-physical 0 is mem[0]

	mu       sync.Mutex // guards the fields below
	pairs    int
	vhost    bool // vhost started: x-query-virtio-vhost-queue-status answers for queues 0 and 1
	statuses []string
	gone     bool     // the device was unplugged
	asked    []string // "cmd queue" of every queue command, in order
	gpa2hva  int
	// vhostUser: the netdev is vhost-user: x-query-virtio-queue-status of
	// a queue of the vhost device (0, 1) while vhost runs makes QEMU send
	// GET_VRING_BASE, which stops the ring in the backend (counted).
	vhostUser    bool
	getVringBase int
	// onStatus runs (under mu) after each x-query-virtio-status answer:
	// a test changes the device between the status and what follows.
	onStatus func()
	gen      int    // the rings' placement: a reset may move them (gen 0, 1, ...)
	packed   bool   // VIRTIO_F_RING_PACKED negotiated
	iommu    bool   // VIRTIO_F_IOMMU_PLATFORM (ACCESS_PLATFORM) negotiated
	statusN  int    // x-query-virtio-status answers
	uuid     string // query-uuid's answer ("" is QEMU's default, the nil UUID)
	// ctl: a file whose content "nodriver" takes DRIVER_OK out of the
	// status (a fake QEMU in its own process: fakeproc_test.go).
	ctl string
}

const (
	ringStride = 0x1000  // queue q's avail ring at GPA ringBase+q*2*stride, used at +stride
	ringBase   = 0x10000 // GPA 0 is no ring address (QEMU's "not set up")
)

func newFakeVM(t testing.TB, pairs int, vhost bool) *fakeVM {
	mem, err := unix.Mmap(-1, 0, ringBase+64*ringStride, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	f := &fakeVM{t: t, sock: filepath.Join(t.TempDir(), "qmp.sock"), mem: mem, pairs: pairs, vhost: vhost,
		statuses: []string{"VIRTIO_CONFIG_S_ACKNOWLEDGE: x", "VIRTIO_CONFIG_S_DRIVER: x", "VIRTIO_CONFIG_S_FEATURES_OK: x", "VIRTIO_CONFIG_S_DRIVER_OK: x"}}
	ln, err := net.Listen("unix", f.sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go f.serve(c)
		}
	}()
	return f
}

// availGPA and usedGPA are where queue q's rings are in generation gen.
func availGPA(gen, q int) int { return ringBase + (gen*16+q)*2*ringStride }
func usedGPA(gen, q int) int  { return availGPA(gen, q) + ringStride }

// setIdx writes queue q's avail and used indices into guest memory (the
// current generation's rings), flags 0.
func (f *fakeVM) setIdx(q int, avail, used uint16) {
	f.mu.Lock()
	gen := f.gen
	f.mu.Unlock()
	f.setRing(gen, q, 0, avail, 0, used)
}

// setRing writes a ring's header words (flags, idx) in generation gen.
func (f *fakeVM) setRing(gen, q int, availFlags, avail, usedFlags, used uint16) {
	binary.LittleEndian.PutUint16(f.mem[availGPA(gen, q):], availFlags)
	binary.LittleEndian.PutUint16(f.mem[availGPA(gen, q)+2:], avail)
	binary.LittleEndian.PutUint16(f.mem[usedGPA(gen, q):], usedFlags)
	binary.LittleEndian.PutUint16(f.mem[usedGPA(gen, q)+2:], used)
}

func (f *fakeVM) hva(gpa uint64) uint64 {
	return linux.MappedAddr(f.mem, 0) + gpa
}

func (f *fakeVM) serve(c net.Conn) {
	defer c.Close()
	fmt.Fprintln(c, greeting72)
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		var req struct {
			Execute   string          `json:"execute"`
			Arguments json.RawMessage `json:"arguments"`
			ID        json.RawMessage `json:"id"`
		}
		if json.Unmarshal(sc.Bytes(), &req) != nil {
			return
		}
		ret, errClass, errDesc := f.answer(req.Execute, req.Arguments)
		id := string(req.ID)
		if id == "" {
			id = "null"
		}
		if errClass != "" {
			fmt.Fprintf(c, `{"error": {"class": %q, "desc": %q}, "id": %s}`+"\n", errClass, errDesc, id)
		} else {
			fmt.Fprintf(c, `{"return": %s, "id": %s}`+"\n", ret, id)
		}
	}
}

func (f *fakeVM) answer(cmd string, raw json.RawMessage) (string, string, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var args struct {
		Path        string `json:"path"`
		Queue       int    `json:"queue"`
		CommandLine string `json:"command-line"`
	}
	json.Unmarshal(raw, &args)
	if strings.HasPrefix(cmd, "x-query-virtio") && cmd != "x-query-virtio" && (f.gone || args.Path != "/machine/peripheral/net0/virtio-backend") {
		return "", "GenericError", fmt.Sprintf("Path %s is not a VirtIODevice", args.Path)
	}
	switch cmd {
	case "qmp_capabilities":
		return "{}", "", ""
	case "query-uuid":
		u := f.uuid
		if u == "" {
			u = "00000000-0000-0000-0000-000000000000"
		}
		return fmt.Sprintf(`{"UUID": %q}`, u), "", ""
	case "x-query-virtio-status":
		st, _ := json.Marshal(f.statuses)
		if f.ctl != "" {
			if b, _ := os.ReadFile(f.ctl); strings.TrimSpace(string(b)) == "nodriver" {
				st, _ = json.Marshal(f.statuses[:min(3, len(f.statuses))])
			}
		}
		transports := `["VIRTIO_RING_F_EVENT_IDX: x", "VIRTIO_F_VERSION_1: x"]`
		if f.packed {
			transports = `["VIRTIO_RING_F_EVENT_IDX: x", "VIRTIO_F_VERSION_1: x", "VIRTIO_F_RING_PACKED: Device supports packed VQ layout"]`
		}
		if f.iommu {
			transports = strings.Replace(transports, "]", `, "VIRTIO_F_IOMMU_PLATFORM: Device can be used on IOMMU platform"]`, 1)
		}
		out := fmt.Sprintf(`{"name": "virtio-net", "num-vqs": %d, "vhost-started": %v, "started": true, "broken": false, "status": {"statuses": %s}, "guest-features": {"transports": %s}}`,
			2*f.pairs+1, f.vhost, st, transports)
		f.statusN++
		if f.onStatus != nil {
			f.onStatus()
		}
		return out, "", ""
	case "x-query-virtio-queue-status":
		f.asked = append(f.asked, fmt.Sprintf("queue-status %d", args.Queue))
		q := args.Queue
		if f.vhost && q < 2 && f.vhostUser {
			// qmp_x_query_virtio_queue_status: vhost_get_vring_base of a
			// queue of the vhost device: the backend stops the ring.
			f.getVringBase++
		}
		return fmt.Sprintf(`{"signalled-used": 0, "inuse": 0, "name": "virtio-net", "vring-align": 4096, "vring-desc": %d, "signalled-used-valid": false, "vring-num-default": 256, "vring-avail": %d, "queue-index": %d, "last-avail-idx": 0, "vring-used": %d, "used-idx": 0, "shadow-avail-idx": 0, "vring-num": 256}`,
			availGPA(f.gen, q)+0x800, availGPA(f.gen, q), q, usedGPA(f.gen, q)), "", ""
	case "x-query-virtio-vhost-queue-status":
		f.asked = append(f.asked, fmt.Sprintf("vhost-queue-status %d", args.Queue))
		q := args.Queue
		if !f.vhost {
			return "", "GenericError", "vhost device has not started yet"
		}
		if q > 1 {
			return "", "GenericError", fmt.Sprintf("Invalid vhost virtqueue number %d", q)
		}
		return fmt.Sprintf(`{"avail": 140000000, "avail-phys": %d, "avail-size": 518, "call": 40, "desc": 140000001, "desc-phys": %d, "desc-size": 4096, "kick": 39, "name": "virtio-net", "num": 256, "used": 140000002, "used-phys": %d, "used-size": 2054}`,
			availGPA(f.gen, q), availGPA(f.gen, q)+0x800, usedGPA(f.gen, q)), "", ""
	case "qom-get":
		return `"hostnet0"`, "", ""
	case "human-monitor-command":
		a, ok := strings.CutPrefix(args.CommandLine, "gpa2hva 0x")
		gpa, err := strconv.ParseUint(a, 16, 64)
		if !ok || err != nil {
			return `"unknown command"`, "", ""
		}
		f.gpa2hva++
		if gpa >= uint64(len(f.mem)) {
			return fmt.Sprintf(`"No memory is mapped at address %#x\r\n"`, gpa), "", ""
		}
		return fmt.Sprintf(`"Host virtual address for %#x (pc.ram) is %#x\r\n"`, gpa, f.hva(gpa)), "", ""
	}
	return "", "CommandNotFound", "The command " + cmd + " has not been found"
}
