package attach

import (
	"context"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/hostnic"
	"github.com/netctl/netctl/policy/host"
	"github.com/netctl/netctl/vdpa"
)

// fakeHost stands in for the host: links are names in a map, every fd is
// a real eventfd (so it can cross the fake QMP socket), and fail makes the
// Nth call of a method fail.
type fakeHost struct {
	// Host is nil: a call of a method attach never makes (the hook's
	// persistent taps, vdpa identity) panics the test.
	hostnic.Host
	mu      sync.Mutex
	links   map[string]int // name -> ifindex
	vdpas   map[string]bool
	open    map[int]string // fds the fake handed out and that are still open (closed through the fake)
	calls   map[string]int
	fail    map[string]int
	next    int
	desc    *host.Description
	created map[string]bool
	vdpaVA  bool // the vdpa parent maps virtual addresses (VDUSE)
	// macvtaps: the lower device and MAC each macvtap was created with
	macvtaps map[string]string
	// specs are the probe specs attach asked for, in order.
	specs []hostnic.ProbeSpec
	// onCreateVDPA, when set, runs as CreateVDPA is called (before it
	// acts): what a kill at that moment would leave.
	onCreateVDPA func()
}

func newFakeHost(t *testing.T, probeFile string) *fakeHost {
	b, err := os.ReadFile("../policy/testdata/" + probeFile)
	if err != nil {
		t.Fatal(err)
	}
	d, err := host.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return &fakeHost{links: map[string]int{"eth0": 2}, vdpas: map[string]bool{}, open: map[int]string{}, calls: map[string]int{},
		fail: map[string]int{}, next: 10, desc: d, created: map[string]bool{}, macvtaps: map[string]string{}}
}

func (h *fakeHost) failing(m string) error {
	h.calls[m]++
	if n, ok := h.fail[m]; ok && n == h.calls[m] {
		return fmt.Errorf("injected failure of %s", m)
	}
	return nil
}

func (h *fakeHost) fd(what string) int {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		panic(err)
	}
	h.open[fd] = what
	return fd
}

func (h *fakeHost) Probe(ctx context.Context, spec hostnic.ProbeSpec) (*host.Description, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.specs = append(h.specs, spec)
	if err := h.failing("Probe"); err != nil {
		return nil, err
	}
	d := *h.desc
	return &d, nil
}

type fakeBackend struct {
	h       *fakeHost
	name    string
	ifindex int
	fds     []int
	created bool
}

func (b *fakeBackend) Name() string      { return b.name }
func (b *fakeBackend) Ifindex() int      { return b.ifindex }
func (b *fakeBackend) Queues() int       { return len(b.fds) }
func (b *fakeBackend) QueueFD(i int) int { return b.fds[i] }
func (b *fakeBackend) Release() error {
	b.h.mu.Lock()
	defer b.h.mu.Unlock()
	for _, fd := range b.fds {
		unix.Close(fd)
		delete(b.h.open, fd)
	}
	b.fds = nil
	return nil
}
func (b *fakeBackend) Destroy() error {
	b.Release()
	b.h.mu.Lock()
	defer b.h.mu.Unlock()
	if b.created {
		delete(b.h.links, b.name)
	}
	return nil
}

func (h *fakeHost) backend(name string, created bool, queues int) *fakeBackend {
	if created {
		h.next++
		h.links[name] = h.next
	}
	b := &fakeBackend{h: h, name: name, ifindex: h.links[name], created: created}
	for i := 0; i < queues; i++ {
		b.fds = append(b.fds, h.fd(name))
	}
	return b
}

func (h *fakeHost) OpenTap(spec TapSpec) (Backend, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.failing("OpenTap"); err != nil {
		return nil, err
	}
	name := spec.Name
	if spec.Create {
		name = strings.Replace(name, "%d", fmt.Sprint(h.next), 1)
	} else if _, ok := h.links[name]; !ok {
		return nil, fmt.Errorf("tap %s: no such link: %w", name, ErrInvalid)
	}
	return h.backend(name, spec.Create, spec.Queues), nil
}

func (h *fakeHost) CreateMacvtap(spec MacvtapSpec) (Backend, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.failing("CreateMacvtap"); err != nil {
		return nil, err
	}
	if _, ok := h.links[spec.Lower]; !ok {
		return nil, fmt.Errorf("macvtap: lower %s does not exist: %w", spec.Lower, ErrInvalid)
	}
	name := spec.Name
	if name == "" {
		name = fmt.Sprintf("nctlmv%d", h.next)
	}
	if _, ok := h.links[name]; ok {
		return nil, fmt.Errorf("macvtap: %q already exists: %w", name, ErrConflict)
	}
	h.macvtaps[name] = spec.Lower + " " + spec.MAC.String()
	return h.backend(name, true, spec.Queues), nil
}

func (h *fakeHost) FindMacvtap(name, lower string, mac net.HardwareAddr) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if i, ok := h.links[name]; ok && h.macvtaps[name] == lower+" "+mac.String() {
		return i
	}
	return 0
}

func (h *fakeHost) OpenVhostNet() (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.failing("OpenVhostNet"); err != nil {
		return -1, err
	}
	return h.fd("vhost-net"), nil
}

func (h *fakeHost) CreateVDPA(ctx context.Context, spec VDPASpec) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.onCreateVDPA != nil {
		h.onCreateVDPA()
	}
	if err := h.failing("CreateVDPA"); err != nil {
		return "", err
	}
	if h.vdpas[spec.Name] {
		// As the kernel answers (vdpa.Client.AddDevice).
		return "", fmt.Errorf("vdpa: dev add %s: a device of that name exists: %w", spec.Name, unix.EEXIST)
	}
	h.vdpas[spec.Name] = true
	h.desc.VDPA.Devices = append(h.desc.VDPA.Devices, host.VDPADevice{Name: spec.Name, Driver: "vhost_vdpa", Features: []string{"VERSION_1", "ACCESS_PLATFORM", "CSUM", "GUEST_CSUM", "MAC"}, FeaturesHex: "0x300000023"})
	return "/dev/vhost-vdpa-0", nil
}

func (h *fakeHost) DeleteVDPA(ctx context.Context, name string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	// The kernel's vhost_vdpa_remove waits until /dev/vhost-vdpa-N is
	// closed: a delete while netctl still holds it never completes.
	for _, kind := range h.open {
		if kind == "vhost-vdpa" {
			return fmt.Errorf("vdpa dev del %s: its /dev/vhost-vdpa node is still open (the kernel waits for the close)", name)
		}
	}
	delete(h.vdpas, name)
	var keep []host.VDPADevice
	for _, d := range h.desc.VDPA.Devices {
		if d.Name != name {
			keep = append(keep, d)
		}
	}
	h.desc.VDPA.Devices = keep
	return nil
}

func (h *fakeHost) VDPAExists(name string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.vdpas[name]
}

func (h *fakeHost) OpenVDPA(ctx context.Context, name string) (int, string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.failing("OpenVDPA"); err != nil {
		return -1, "", err
	}
	return h.fd("vhost-vdpa"), "/dev/vhost-vdpa-0", nil
}

// VDPAMapMode: a hardware-like (PA) parent unless the test set vdpaVA.
func (h *fakeHost) VDPAMapMode(int) vdpa.MapMode {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.vdpaVA {
		return vdpa.MapVA
	}
	return vdpa.MapPA
}

func (h *fakeHost) DeleteLink(name string, ifindex int) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.failing("DeleteLink"); err != nil {
		return err
	}
	if i, ok := h.links[name]; ok && (ifindex == 0 || i == ifindex) {
		delete(h.links, name)
	}
	return nil
}

func (h *fakeHost) LinkExists(name string, ifindex int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	i, ok := h.links[name]
	return ok && (ifindex == 0 || i == ifindex)
}

func (h *fakeHost) CloseFD(fd int) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.open, fd)
	return unix.Close(fd)
}

// left says what the fake host still has beyond what it started with.
func (h *fakeHost) left() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var l []string
	for n := range h.links {
		if n != "eth0" && n != "tap9" {
			l = append(l, "link "+n)
		}
	}
	for n := range h.vdpas {
		l = append(l, "vdpa "+n)
	}
	for fd, what := range h.open {
		l = append(l, fmt.Sprintf("fd %d (%s)", fd, what))
	}
	sort.Strings(l)
	return strings.Join(l, ", ")
}
