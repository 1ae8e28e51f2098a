package attach

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// fakeQEMU is a QMP server on a unix socket with the state attach
// changes: getfd names (with the fds received), netdevs (with the fds
// they consumed), devices, fdsets. Connections come one at a time, as
// with QEMU; names survive a closed connection (they belong to the
// monitor). Faults: fail makes the Nth call of a command answer an error,
// hangup closes the connection at the Nth call of a command instead of
// answering.
type fakeQEMU struct {
	t    *testing.T
	sock string
	ln   *net.UnixListener

	mu       sync.Mutex       // guards everything below
	names    map[string]int   // getfd name -> fd
	netdevs  map[string][]int // id -> fds it holds
	devices  map[string]string
	pending  map[string]bool // device_del sent, not yet done
	events   []string
	calls    map[string]int
	fail     map[string]int // command -> the call (1-based) that fails
	hangup   map[string]int
	after    map[string]int // like hangup, but after doing the command
	unplug   string         // "instant" (default), "never", "second" (after a repeated device_del), "blinking" (native PCIe: a repeat is refused while the guest's 5 s wait runs, then the unplug ends by itself)
	log      []string
	propFail string // device_add fails when this property is given
	name     string // query-name's answer
	shareRAM bool   // query-memdev says the machine's RAM is shared (memory-backend-memfd,share=on)
	// machine is qom-get /machine type's answer ("" for i440fx); on q35
	// rootPorts are the pcie-root-ports' ids, and onPort which device
	// sits on each.
	machine   string
	rootPorts []string
	onPort    map[string]string
}

func newFakeQEMU(t *testing.T) *fakeQEMU {
	f := &fakeQEMU{t: t, sock: filepath.Join(t.TempDir(), "qmp.sock"), names: map[string]int{}, netdevs: map[string][]int{},
		devices: map[string]string{}, pending: map[string]bool{}, calls: map[string]int{}, fail: map[string]int{}, hangup: map[string]int{}, after: map[string]int{}}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: f.sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	f.ln = ln
	go func() {
		for {
			c, err := ln.AcceptUnix()
			if err != nil {
				return
			}
			f.serve(c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, fd := range f.names {
			unix.Close(fd)
		}
		for _, fds := range f.netdevs {
			for _, fd := range fds {
				unix.Close(fd)
			}
		}
	})
	return f
}

// newFakeVMs starts n fake QEMUs, named vm0, vm1, ...
func newFakeVMs(t *testing.T, n int) []*fakeQEMU {
	var vms []*fakeQEMU
	for i := 0; i < n; i++ {
		q := newFakeQEMU(t)
		q.mu.Lock()
		q.name = fmt.Sprintf("vm%d", i)
		q.mu.Unlock()
		vms = append(vms, q)
	}
	return vms
}

func (f *fakeQEMU) serve(c *net.UnixConn) {
	defer c.Close()
	c.Write([]byte(`{"QMP": {"version": {"qemu": {"micro": 22, "minor": 2, "major": 7}, "package": ""}, "capabilities": ["oob"]}}` + "\n"))
	var pendingFDs []int
	buf := make([]byte, 64<<10)
	oob := make([]byte, 256)
	var acc []byte
	for {
		n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
		if err != nil || n == 0 {
			for _, fd := range pendingFDs {
				unix.Close(fd)
			}
			return
		}
		if oobn > 0 {
			msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
			for _, m := range msgs {
				if fds, err := unix.ParseUnixRights(&m); err == nil {
					pendingFDs = append(pendingFDs, fds...)
				}
			}
		}
		acc = append(acc, buf[:n]...)
		for {
			i := strings.IndexByte(string(acc), '\n')
			if i < 0 {
				break
			}
			line := acc[:i]
			acc = acc[i+1:]
			var req struct {
				Execute   string          `json:"execute"`
				Arguments json.RawMessage `json:"arguments"`
				ID        json.RawMessage `json:"id"`
			}
			json.Unmarshal(line, &req)
			var fd = -1
			if req.Execute == "getfd" && len(pendingFDs) > 0 {
				fd, pendingFDs = pendingFDs[0], pendingFDs[1:]
			}
			ret, qerr, hang := f.handle(req.Execute, req.Arguments, fd)
			if hang {
				return
			}
			w := bufio.NewWriter(c)
			f.mu.Lock()
			for _, e := range f.events {
				w.WriteString(e + "\n")
			}
			f.events = nil
			f.mu.Unlock()
			if qerr != "" {
				class, desc, _ := strings.Cut(qerr, ":")
				b, _ := json.Marshal(map[string]any{"error": map[string]string{"class": class, "desc": desc}, "id": req.ID})
				w.Write(append(b, '\n'))
			} else {
				b, _ := json.Marshal(map[string]any{"return": ret, "id": req.ID})
				w.Write(append(b, '\n'))
			}
			if w.Flush() != nil {
				return
			}
		}
	}
}

type args map[string]any

func (f *fakeQEMU) handle(cmd string, raw json.RawMessage, fd int) (ret any, qerr string, hang bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var a args
	json.Unmarshal(raw, &a)
	f.calls[cmd]++
	f.log = append(f.log, cmd)
	if n, ok := f.hangup[cmd]; ok && n == f.calls[cmd] {
		if fd >= 0 {
			unix.Close(fd)
		}
		return nil, "", true
	}
	if n, ok := f.after[cmd]; ok && n == f.calls[cmd] {
		delete(f.after, cmd)
		f.calls[cmd]--
		f.mu.Unlock()
		f.handle(cmd, raw, fd)
		f.mu.Lock()
		return nil, "", true
	}
	if n, ok := f.fail[cmd]; ok && n == f.calls[cmd] {
		if fd >= 0 {
			unix.Close(fd)
		}
		return nil, "GenericError:injected failure of " + cmd, false
	}
	s := func(k string) string { v, _ := a[k].(string); return v }
	switch cmd {
	case "qmp_capabilities", "query-status":
		return map[string]any{}, "", false
	case "query-version":
		return map[string]any{"qemu": map[string]int{"major": 7, "minor": 2, "micro": 22}, "package": ""}, "", false
	case "query-name":
		name := f.name
		if name == "" {
			name = "vm1"
		}
		return map[string]string{"name": name}, "", false
	case "qom-get":
		if f.machine != "" {
			return f.machine, "", false
		}
		return "pc-i440fx-7.2-machine", "", false
	case "query-pci":
		return []map[string]any{{"bus": 0, "devices": []any{}}}, "", false
	case "query-fdsets":
		return []any{}, "", false
	case "query-memdev": // QEMU 7.2's answer for -m 128 (pc.ram), shared when the test says so
		return []map[string]any{{"id": "pc.ram", "share": f.shareRAM, "size": 134217728, "merge": true, "dump": true,
			"prealloc": false, "reserve": true, "policy": "default", "host-nodes": []int{}}}, "", false
	case "human-monitor-command":
		var b strings.Builder
		for _, id := range sortedKeysOf(f.netdevs) {
			fmt.Fprintf(&b, "%s: index=0,type=tap,fds=x\r\n", id)
		}
		for _, id := range sortedKeysOf(f.devices) {
			fmt.Fprintf(&b, "%s: index=0,type=nic,model=virtio-net-pci,macaddr=52:54:00:12:34:56\r\n \\ netdev: ...\r\n", id)
		}
		return b.String(), "", false
	case "qom-list":
		out := []map[string]string{{"name": "type", "type": "string"}}
		if port, ok := strings.CutPrefix(s("path"), "/machine/peripheral/"); ok {
			// A root port's bus: child[0] when a device sits on it.
			if d := f.onPort[port[:max(0, strings.IndexByte(port, '/'))]]; d != "" {
				out = append(out, map[string]string{"name": "child[0]", "type": "child<virtio-net-pci>"})
			}
			return out, "", false
		}
		for _, id := range f.rootPorts {
			out = append(out, map[string]string{"name": id, "type": "child<pcie-root-port>"})
		}
		for id := range f.devices {
			out = append(out, map[string]string{"name": id, "type": "child<virtio-net-pci>"})
		}
		return out, "", false
	case "getfd":
		if fd < 0 {
			return nil, "GenericError:No file descriptor supplied via SCM_RIGHTS", false
		}
		if old, ok := f.names[s("fdname")]; ok {
			unix.Close(old)
		}
		f.names[s("fdname")] = fd
		return map[string]any{}, "", false
	case "closefd":
		fd, ok := f.names[s("fdname")]
		if !ok {
			return nil, "GenericError:File descriptor named '" + s("fdname") + "' not found", false
		}
		unix.Close(fd)
		delete(f.names, s("fdname"))
		return map[string]any{}, "", false
	case "netdev_add":
		id := s("id")
		if _, ok := f.netdevs[id]; ok {
			return nil, "GenericError:Duplicate ID '" + id + "' for netdev", false
		}
		var fds []int
		for _, k := range []string{"fds", "vhostfds", "vhostfd"} {
			if s(k) == "" {
				continue
			}
			for _, n := range strings.Split(s(k), ":") {
				fd, ok := f.names[n]
				if !ok {
					for _, fd := range fds {
						unix.Close(fd)
					}
					return nil, "GenericError:File descriptor named '" + n + "' has not been found", false
				}
				delete(f.names, n) // consumed, even when a later step fails
				fds = append(fds, fd)
			}
		}
		if s("type") == "tap" && a["vhost"] == true && a["vhostfds"] == nil {
			for _, fd := range fds {
				unix.Close(fd)
			}
			return nil, "GenericError:vhost-net requested but could not be initialized", false
		}
		f.netdevs[id] = fds
		return map[string]any{}, "", false
	case "netdev_del":
		fds, ok := f.netdevs[s("id")]
		if !ok {
			return nil, "DeviceNotFound:Device '" + s("id") + "' not found", false
		}
		for _, fd := range fds {
			unix.Close(fd)
		}
		delete(f.netdevs, s("id"))
		return map[string]any{}, "", false
	case "device_add":
		id := s("id")
		if _, ok := f.devices[id]; ok {
			return nil, "GenericError:Duplicate device ID '" + id + "'", false
		}
		if _, ok := f.netdevs[s("netdev")]; !ok {
			return nil, "GenericError:Property 'virtio-net-pci.netdev' can't find value '" + s("netdev") + "'", false
		}
		for _, d := range f.devices {
			if d == s("netdev") {
				return nil, "GenericError:Property 'virtio-net-pci.netdev' can't take value '" + s("netdev") + "', it's in use", false
			}
		}
		if f.propFail != "" && a[f.propFail] != nil {
			return nil, "GenericError:Property '" + f.propFail + "' refused", false
		}
		f.devices[id] = s("netdev")
		return map[string]any{}, "", false
	case "device_del":
		id := s("id")
		if _, ok := f.devices[id]; !ok {
			return nil, "DeviceNotFound:Device '" + id + "' not found", false
		}
		if f.pending[id] && f.unplug == "blinking" {
			// QEMU 7.2's pcie_cap_slot_unplug_request_cb while pciehp
			// waits; the unplug completes on its own after the retry.
			delete(f.devices, id)
			delete(f.pending, id)
			f.events = append(f.events, `{"event":"DEVICE_DELETED","data":{"device":"`+id+`","path":"/machine/peripheral/`+id+`"},"timestamp":{"seconds":1,"microseconds":2}}`)
			return nil, "GenericError:Hot-unplug failed: guest is busy (power indicator blinking)", false
		}
		if f.pending[id] && f.unplug != "second" {
			return nil, "GenericError:Device " + id + " is already in the process of unplug", false
		}
		if f.unplug == "never" || f.unplug == "blinking" || (f.unplug == "second" && !f.pending[id]) {
			f.pending[id] = true
			return map[string]any{}, "", false
		}
		delete(f.devices, id)
		delete(f.pending, id)
		f.events = append(f.events, `{"event":"DEVICE_DELETED","data":{"path":"/machine/peripheral/`+id+`/virtio-backend"},"timestamp":{"seconds":1,"microseconds":2}}`,
			`{"event":"DEVICE_DELETED","data":{"device":"`+id+`","path":"/machine/peripheral/`+id+`"},"timestamp":{"seconds":1,"microseconds":2}}`)
		return map[string]any{}, "", false
	}
	return nil, "CommandNotFound:The command " + cmd + " has not been found", false
}

func sortedKeysOf[V any](m map[string]V) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	sort.Strings(k)
	return k
}

// left says what the fake QEMU still holds.
func (f *fakeQEMU) left() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var l []string
	for n := range f.names {
		l = append(l, "fd name "+n)
	}
	for n := range f.netdevs {
		l = append(l, "netdev "+n)
	}
	for n := range f.devices {
		l = append(l, "device "+n)
	}
	sort.Strings(l)
	return strings.Join(l, ", ")
}
