package cni

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/hostnic"
	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/macvtap"
)

// The host tests run the real cnitool (cni v1.3.0, built by the test
// from the module's own dependency) against the netctl binary (built by
// the test) installed as "netctl" in CNI_PATH, as a runtime runs it.

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// bins builds netctl and cnitool once into a directory that outlives the
// tests of this run (removed by TestMain).
func bins(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "netctl-cni-bin")
		if buildErr != nil {
			return
		}
		for pkg, name := range map[string]string{"github.com/netctl/netctl/cmd/netctl": "netctl", "github.com/containernetworking/cni/cnitool": "cnitool"} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(binDir, name), pkg)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

func TestMain(m *testing.M) {
	if name := os.Getenv("NETCTL_CNI_OPEN_TAP"); name != "" {
		os.Exit(openTapHelper(name))
	}
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// env is one test's CNI setup: a network config directory, a private
// /var/lib/cni (libcni's result cache; cnitool cannot be told another),
// and the state root netctl's probe caches in.
type env struct {
	t    *testing.T
	bin  string
	conf string
	run  string
}

// setup makes the test a host test (its own network and mount
// namespaces) and writes conflist conf as network "nctl".
func setup(t *testing.T, conf string) *env {
	bin := bins(t) // before the namespaces: go build needs no root's view
	testenv.Host(t)
	// A machine that never ran a CNI runtime has no /var/lib/cni, and the
	// test makes nothing outside its own mounts: it then hides /var/lib
	// under a tmpfs (in its own mount namespace) that has an empty cni.
	if _, err := os.Stat("/var/lib/cni"); os.IsNotExist(err) {
		if err := unix.Mount("tmpfs", "/var/lib", "tmpfs", 0, "size=16m"); err != nil {
			t.Fatalf("a private /var/lib for cnitool's cache: %v", err)
		}
		if err := os.Mkdir("/var/lib/cni", 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mount("tmpfs", "/var/lib/cni", "tmpfs", 0, "size=16m"); err != nil {
		t.Fatalf("a private /var/lib/cni for cnitool's cache: %v", err)
	}
	e := &env{t: t, bin: bin, conf: t.TempDir(), run: t.TempDir()}
	e.writeConf(conf)
	return e
}

func (e *env) writeConf(conf string) {
	if err := os.WriteFile(filepath.Join(e.conf, "nctl.conflist"), []byte(conf), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// newNetns makes a network namespace bound at a file (a pod's).
func (e *env) newNetns() string {
	e.t.Helper()
	p := filepath.Join(e.t.TempDir(), "netns")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		e.t.Fatal(err)
	}
	if out, err := exec.Command("unshare", "--net="+p, "true").CombinedOutput(); err != nil {
		e.t.Fatalf("unshare --net=%s: %v: %s", p, err, out)
	}
	e.t.Cleanup(func() { unix.Unmount(p, unix.MNT_DETACH) })
	return p
}

// dropNetns removes the namespace (the pod is gone).
func dropNetns(t *testing.T, p string) {
	if err := unix.Unmount(p, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	os.Remove(p)
}

func (e *env) cnitoolCmd(op, ns string, extra ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(e.bin, "cnitool"), op, "nctl", ns)
	cmd.Env = append(os.Environ(), "NETCONFPATH="+e.conf, "CNI_PATH="+e.bin, "NETCTL_RUN_DIR="+e.run)
	cmd.Env = append(cmd.Env, extra...)
	return cmd
}

// cnitool runs cnitool op on the pod namespace ns.
func (e *env) cnitool(op, ns string, extra ...string) (string, error) {
	cmd := e.cnitoolCmd(op, ns, extra...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		return out.String() + errb.String(), fmt.Errorf("cnitool %s: %v: %s%s", op, err, out.String(), errb.String())
	}
	return out.String(), nil
}

// link reads link name in the namespace at ns (nil when there is none).
func link(t *testing.T, ns, name string) netlink.Link {
	t.Helper()
	h := handle(t, ns)
	defer h.Close()
	l, err := h.LinkByName(name)
	if err != nil {
		return nil
	}
	return l
}

func handle(t *testing.T, ns string) *netlink.Handle {
	t.Helper()
	n, err := netns.GetFromPath(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	h, err := netlink.NewHandleAt(n, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// linkNames are the links in the namespace at ns ("" is this thread's).
func linkNames(t *testing.T, ns string) []string {
	t.Helper()
	var ls []netlink.Link
	var err error
	if ns == "" {
		ls, err = netlink.LinkList()
	} else {
		h := handle(t, ns)
		defer h.Close()
		ls, err = h.LinkList()
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range ls {
		names = append(names, l.Attrs().Name)
	}
	return names
}

type result struct {
	CNIVersion string `json:"cniVersion"`
	Interfaces []struct {
		Name, Mac, Sandbox string
		Mtu                int
	} `json:"interfaces"`
}

const tapConf = `{"cniVersion":"1.1.0","name":"nctl","plugins":[{"type":"netctl","queues":4,"mtu":1400}]}`

// TestHostCNIToolTap: cnitool ADD makes a marked, persistent, multiqueue
// vnet_hdr tap eth0 owned by 107 with the MTU and the CNI_ARGS MAC in the
// pod's namespace and lists it with its sandbox and MAC; CHECK passes,
// and fails once the tap's MTU is changed behind netctl's back; STATUS
// passes; DEL deletes it, and a second DEL succeeds; nothing is left in
// the pod's or the runtime's namespace.
func TestHostCNIToolTap(t *testing.T) {
	e := setup(t, tapConf)
	before := linkNames(t, "")
	ns := e.newNetns()
	out, err := e.cnitool("add", ns, "CNI_ARGS=MAC=02:00:00:aa:bb:cc;IgnoreUnknown=1")
	if err != nil {
		t.Fatal(err)
	}
	var r result
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("ADD result %q: %v", out, err)
	}
	if r.CNIVersion != "1.1.0" || len(r.Interfaces) != 1 || r.Interfaces[0].Name != "eth0" || r.Interfaces[0].Sandbox != ns ||
		r.Interfaces[0].Mac != "02:00:00:aa:bb:cc" || r.Interfaces[0].Mtu != 1400 {
		t.Fatalf("ADD result: %s", out)
	}
	l := link(t, ns, "eth0")
	tap, ok := l.(*netlink.Tuntap)
	if !ok {
		t.Fatalf("eth0 in the pod: %#v, want a tap", l)
	}
	if tap.Mode != netlink.TUNTAP_MODE_TAP || tap.Flags&netlink.TUNTAP_VNET_HDR == 0 || tap.Flags&netlink.TUNTAP_MULTI_QUEUE == 0 ||
		tap.NonPersist || tap.Owner != 107 || tap.MTU != 1400 || tap.Alias != hostnic.CNITapAlias || tap.Flags&netlink.TUNTAP_NO_PI == 0 ||
		tap.Attrs().RawFlags&unix.IFF_UP == 0 {
		t.Errorf("tap: mode %v flags %v persist %v owner %d mtu %d alias %q rawflags %#x", tap.Mode, tap.Flags, !tap.NonPersist, tap.Owner, tap.MTU, tap.Alias, tap.Attrs().RawFlags)
	}
	if got := strings.Join(linkNames(t, ""), " "); got != strings.Join(before, " ") {
		t.Errorf("the runtime's namespace has %s after ADD, had %s", got, before)
	}
	if _, err := e.cnitool("check", ns); err != nil {
		t.Errorf("CHECK on the tap ADD made: %v", err)
	}
	if _, err := e.cnitool("status", ns); err != nil {
		t.Errorf("STATUS: %v", err)
	}
	// A VMM attached with fewer queues (2) than the configuration's: CHECK
	// says so; with none attached again it passes.
	var q *macvtap.Tap
	if err := inNetNS(ns, func() error {
		var err error
		q, err = macvtap.CreateTap(macvtap.TapConfig{Name: "eth0", VnetHdr: true, Queues: 2})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if out, err := e.cnitool("check", ns); err == nil || !strings.Contains(out, "2 queue(s) attached, not 4") {
		t.Errorf("CHECK with 2 queues attached: %v, %s; want a failure naming the queues", err, out)
	}
	q.Close()
	if _, err := e.cnitool("check", ns); err != nil {
		t.Errorf("CHECK after the queue closed: %v", err)
	}
	// Behind netctl's back: CHECK says what is wrong.
	h := handle(t, ns)
	if err := h.LinkSetMTU(l, 1500); err != nil {
		t.Fatal(err)
	}
	h.Close()
	if out, err := e.cnitool("check", ns); err == nil || !strings.Contains(out, "mtu is 1500, not 1400") {
		t.Errorf("CHECK after the MTU changed: %v, %s; want a failure naming the MTU", err, out)
	}
	for i := range 2 {
		if _, err := e.cnitool("del", ns); err != nil {
			t.Fatalf("DEL #%d: %v", i+1, err)
		}
	}
	if got := linkNames(t, ns); strings.Join(got, " ") != "lo" {
		t.Errorf("pod namespace after DEL: %v, want only lo", got)
	}
	if ents, _ := os.ReadDir("/var/lib/cni/results"); len(ents) != 0 {
		t.Errorf("libcni's cache after DEL: %v", ents)
	}
}

// TestHostCNIToolDelNetnsGone: DEL after the pod's namespace is gone
// succeeds (the tap went with it), as does DEL with no namespace.
func TestHostCNIToolDelNetnsGone(t *testing.T) {
	e := setup(t, tapConf)
	ns := e.newNetns()
	if _, err := e.cnitool("add", ns); err != nil {
		t.Fatal(err)
	}
	dropNetns(t, ns)
	if out, err := e.cnitool("del", ns); err != nil {
		t.Fatalf("DEL after the namespace is gone: %v %s", err, out)
	}
	if out, err := e.cnitool("del", ns); err != nil {
		t.Fatalf("second DEL: %v %s", err, out)
	}
}

// TestHostCNIToolParallel: 16 pods ADD at once, each gets its tap; 16
// DELs at once leave nothing in any namespace.
func TestHostCNIToolParallel(t *testing.T) {
	e := setup(t, tapConf)
	before := linkNames(t, "")
	const n = 16
	var nss []string
	for range n {
		nss = append(nss, e.newNetns())
	}
	run := func(op string) {
		// Started from this (the test's locked) thread, so that each
		// cnitool sees the test's namespaces; they then run at once.
		var cmds []*exec.Cmd
		var outs []*bytes.Buffer
		for _, ns := range nss {
			c := e.cnitoolCmd(op, ns)
			var b bytes.Buffer
			c.Stdout, c.Stderr = &b, &b
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			cmds, outs = append(cmds, c), append(outs, &b)
		}
		for i, c := range cmds {
			if err := c.Wait(); err != nil {
				t.Errorf("%s pod %d: %v: %s", op, i, err, outs[i])
			}
		}
	}
	run("add")
	for i, ns := range nss {
		if l := link(t, ns, "eth0"); l == nil || l.Type() != "tuntap" || l.Attrs().Alias != hostnic.CNITapAlias {
			t.Errorf("pod %d: eth0 after ADD: %v", i, l)
		}
	}
	run("del")
	for i, ns := range nss {
		if got := linkNames(t, ns); strings.Join(got, " ") != "lo" {
			t.Errorf("pod %d after DEL: %v", i, got)
		}
	}
	if got := strings.Join(linkNames(t, ""), " "); got != strings.Join(before, " ") {
		t.Errorf("the runtime's namespace has %s after the pods, had %s", got, before)
	}
}

// TestHostCNIToolNotOurs: a link the pod has under CNI_IFNAME that netctl
// did not make is refused by ADD (code 101, saying what to do) and left
// alone by ADD and DEL.
func TestHostCNIToolNotOurs(t *testing.T) {
	e := setup(t, tapConf)
	ns := e.newNetns()
	h := handle(t, ns)
	defer h.Close()
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth0"}, PeerName: "peer0"}); err != nil {
		t.Fatal(err)
	}
	out, err := e.cnitool("add", ns)
	if err == nil || !strings.Contains(out, "netctl did not create it") {
		t.Fatalf("ADD over another's eth0: %v %s", err, out)
	}
	if _, err := e.cnitool("del", ns); err != nil {
		t.Fatal(err)
	}
	if l := link(t, ns, "eth0"); l == nil || l.Type() != "veth" {
		t.Fatalf("the pod's own eth0 after ADD and DEL: %v", l)
	}
}

// TestHostCNIToolMacvtap: with "master", ADD makes a macvtap on that
// lower device and moves it, marked, into the pod as eth0 with the MAC;
// CHECK passes; DEL deletes it, leaving the lower device.
func TestHostCNIToolMacvtap(t *testing.T) {
	e := setup(t, `{"cniVersion":"1.1.0","name":"nctl","plugins":[{"type":"netctl","master":"lower0","queues":2,"mac":"02:00:00:00:00:07"}]}`)
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "lower0"}, PeerName: "lower1"}); err != nil {
		t.Fatal(err)
	}
	before := linkNames(t, "")
	ns := e.newNetns()
	out, err := e.cnitool("add", ns)
	if err != nil {
		t.Fatal(err)
	}
	l := link(t, ns, "eth0")
	if l == nil || l.Type() != "macvtap" || l.Attrs().Alias != hostnic.MacvtapAlias || l.Attrs().HardwareAddr.String() != "02:00:00:00:00:07" {
		t.Fatalf("eth0 in the pod: %v (result %s)", l, out)
	}
	if !strings.Contains(out, `"mac": "02:00:00:00:00:07"`) || !strings.Contains(out, ns) {
		t.Errorf("ADD result: %s", out)
	}
	if _, err := e.cnitool("check", ns); err != nil {
		t.Errorf("CHECK: %v", err)
	}
	if _, err := e.cnitool("del", ns); err != nil {
		t.Fatal(err)
	}
	if got := linkNames(t, ns); strings.Join(got, " ") != "lo" {
		t.Errorf("pod after DEL: %v", got)
	}
	if got := strings.Join(linkNames(t, ""), " "); got != strings.Join(before, " ") {
		t.Errorf("runtime namespace after DEL: %s, had %s", got, before)
	}
}

// TestHostCNIBadConfigs: the netctl binary, run as a runtime runs it,
// answers every bad configuration (badConfigs) and every bad environment
// with CNI error JSON on stdout (code, msg saying what to fix, details)
// and exit status 1, and makes nothing.
func TestHostCNIBadConfigs(t *testing.T) {
	e := setup(t, tapConf)
	ns := e.newNetns()
	notNS := filepath.Join(t.TempDir(), "file")
	os.WriteFile(notNS, nil, 0o644)
	goodEnv := []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=c1", "CNI_NETNS=" + ns, "CNI_IFNAME=eth0", "CNI_PATH=" + e.bin, "NETCTL_RUN_DIR=" + e.run}
	with := func(kv ...string) []string {
		env := append([]string(nil), goodEnv...)
		for _, x := range kv {
			k, _, _ := strings.Cut(x, "=")
			for i := range env {
				if strings.HasPrefix(env[i], k+"=") {
					env = append(env[:i], env[i+1:]...)
					break
				}
			}
			if !strings.HasSuffix(x, "=") {
				env = append(env, x)
			}
		}
		return env
	}
	type tc struct {
		name    string
		env     []string
		conf    string
		code    uint
		msg     string
		details string
	}
	var cases []tc
	for _, c := range badConfigs {
		cases = append(cases, tc{c.conf, goodEnv, c.conf, c.code, c.msg, c.details})
	}
	good := `{"cniVersion":"1.1.0","name":"n","type":"netctl"}`
	cases = append(cases,
		tc{"no CNI_PATH", with("CNI_PATH="), good, 4, "CNI_PATH", ""},
		tc{"no CNI_NETNS", with("CNI_NETNS="), good, 4, "CNI_NETNS", ""},
		tc{"bad CNI_IFNAME", with("CNI_IFNAME=a/b"), good, 4, "", ""},
		tc{"long CNI_IFNAME", with("CNI_IFNAME=abcdefghijklmnop"), good, 4, "too long", "less than 16"},
		tc{"bad CNI_ARGS MAC", with("CNI_ARGS=MAC=zz"), good, 4, "unicast", "CNI_ARGS"},
		tc{"CNI_NETNS not a namespace", with("CNI_NETNS=" + notNS), good, 8, "not a network namespace", ""},
		tc{"unknown version", goodEnv, `{"cniVersion":"9.9.9","name":"n","type":"netctl"}`, 1, "", ""},
		tc{"version without interfaces", goodEnv, `{"cniVersion":"0.2.0","name":"n","type":"netctl"}`, 1, "use \"cniVersion\": \"1.1.0\"", `"cniVersion"`},
		tc{"plan file missing", goodEnv, `{"cniVersion":"1.1.0","name":"n","type":"netctl","plan":"/nonexistent/pool.json"}`, 7, "netctl plan -j", `"plan"`},
		tc{"plan not a plan", goodEnv, `{"cniVersion":"1.1.0","name":"n","type":"netctl","plan":"` + notNS + `"}`, 7, "plan " + notNS, `"plan"`},
		tc{"master missing", goodEnv, `{"cniVersion":"1.1.0","name":"n","type":"netctl","master":"nosuch0"}`, 100, "name the lower device", ""},
		tc{"CHECK without prevResult", with("CNI_COMMAND=CHECK"), good, 7, "prevResult", ""},
	)
	if _, err := os.Stat("/dev/vhost-net"); err != nil {
		cases = append(cases, tc{"vhost-net not here", goodEnv, `{"cniVersion":"1.1.0","name":"n","type":"netctl","backend":"vhost-net"}`, 100, "vhost-net", ""})
	}
	for i, c := range cases {
		cmd := exec.Command(filepath.Join(e.bin, "netctl"))
		if i%2 == 1 {
			cmd.Args = append(cmd.Args, "cni") // the spelled-out form answers alike
		}
		cmd.Env = c.env
		cmd.Stdin = strings.NewReader(c.conf)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Errorf("%.60s: exit %v, want 1 (stdout %s)", c.name, err, out.String())
			continue
		}
		var got struct {
			Code    uint   `json:"code"`
			Msg     string `json:"msg"`
			Details string `json:"details"`
		}
		d := json.NewDecoder(bytes.NewReader(out.Bytes()))
		d.DisallowUnknownFields()
		if err := d.Decode(&got); err != nil {
			t.Errorf("%.60s: stdout %q is not CNI error JSON: %v", c.name, out.String(), err)
			continue
		}
		if got.Code != c.code || got.Msg == "" || !strings.Contains(got.Msg, c.msg) || !strings.Contains(got.Details, c.details) {
			t.Errorf("%.60s: got %+v; want code %d, %q in msg, %q in details", c.name, got, c.code, c.msg, c.details)
		}
	}
	if got := linkNames(t, ns); strings.Join(got, " ") != "lo" {
		t.Errorf("the pod after refused ADDs: %v", got)
	}
}

// TestHostCNIToolVersions: configs of older spec versions (KubeVirt's
// docs use 0.3.1) get their result in that version, and CHECK runs
// where the version has it (0.4.0 on).
func TestHostCNIToolVersions(t *testing.T) {
	e := setup(t, tapConf)
	for _, v := range []string{"0.3.0", "0.3.1", "0.4.0", "1.0.0"} {
		e.writeConf(`{"cniVersion":"` + v + `","name":"nctl","plugins":[{"type":"netctl"}]}`)
		ns := e.newNetns()
		out, err := e.cnitool("add", ns)
		if err != nil {
			t.Errorf("%s: ADD: %v", v, err)
			continue
		}
		var r struct {
			CNIVersion string `json:"cniVersion"`
		}
		if json.Unmarshal([]byte(out), &r); r.CNIVersion != v {
			t.Errorf("%s: ADD result %s", v, out)
		}
		if v >= "0.4.0" {
			if _, err := e.cnitool("check", ns); err != nil {
				t.Errorf("%s: CHECK: %v", v, err)
			}
		}
		if _, err := e.cnitool("del", ns); err != nil {
			t.Errorf("%s: DEL: %v", v, err)
		}
		if got := linkNames(t, ns); strings.Join(got, " ") != "lo" {
			t.Errorf("%s: pod after DEL: %v", v, got)
		}
	}
}

// TestHostCNIToolDelAfterConfChange: a DEL whose configuration names
// "master" (changed since ADD) still deletes the tap ADD made, and one
// whose configuration names no master deletes the macvtap.
func TestHostCNIToolDelAfterConfChange(t *testing.T) {
	const mv = `{"cniVersion":"1.1.0","name":"nctl","plugins":[{"type":"netctl","master":"lower0"}]}`
	e := setup(t, tapConf)
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "lower0"}, PeerName: "lower1"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][2]string{{tapConf, mv}, {mv, tapConf}} {
		ns := e.newNetns()
		e.writeConf(c[0])
		if _, err := e.cnitool("add", ns); err != nil {
			t.Fatal(err)
		}
		e.writeConf(c[1])
		if _, err := e.cnitool("del", ns); err != nil {
			t.Fatal(err)
		}
		if got := linkNames(t, ns); strings.Join(got, " ") != "lo" {
			t.Errorf("ADD with %s, DEL with %s: the pod has %v", c[0], c[1], got)
		}
	}
}

// openTapHelper is the test binary re-run as another user: it attaches a
// queue to tap name as QEMU does (TUNSETIFF with vnet_hdr and
// multi_queue) and says whether the kernel let it.
func openTapHelper(name string) int {
	dev := os.Getenv("NETCTL_CNI_TUN")
	fd, err := unix.Open(dev, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		fmt.Println("open", dev+":", err)
		return 1
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI | unix.IFF_VNET_HDR | unix.IFF_MULTI_QUEUE)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		fmt.Println("TUNSETIFF:", err)
		return 1
	}
	fmt.Println("attached")
	return 0
}

// TestHostCNIToolOwner: the tap ADD makes can be opened by its owner
// (uid 107, virt-launcher's unprivileged qemu) and not by another
// unprivileged user.
func TestHostCNIToolOwner(t *testing.T) {
	e := setup(t, tapConf)
	ns := e.newNetns()
	if _, err := e.cnitool("add", ns); err != nil {
		t.Fatal(err)
	}
	// The test binary, where another user can run it.
	dir, err := os.MkdirTemp("", "netctl-cni-owner")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "helper")
	if err := os.WriteFile(exe, self, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The tun clone device as virt-launcher's qemu has it (KubeVirt's
	// device plugin gives it the node): one it may open, on a tmpfs of
	// the test's own mount namespace.
	devDir := filepath.Join(dir, "dev")
	os.Mkdir(devDir, 0o755)
	if err := unix.Mount("tmpfs", devDir, "tmpfs", 0, "mode=0755"); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(devDir, unix.MNT_DETACH)
	tun := filepath.Join(devDir, "tun")
	if err := unix.Mknod(tun, unix.S_IFCHR|0o666, int(unix.Mkdev(10, 200))); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tun, 0o666); err != nil {
		t.Fatal(err)
	}
	open := func(uid uint32) (string, error) {
		var out []byte
		var err error
		if nerr := inNetNS(ns, func() error {
			cmd := exec.Command(exe)
			cmd.Env = []string{"NETCTL_CNI_OPEN_TAP=eth0", "NETCTL_CNI_TUN=" + tun}
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
			out, err = cmd.CombinedOutput()
			return nil
		}); nerr != nil {
			t.Fatal(nerr)
		}
		return string(out), err
	}
	if out, err := open(107); err != nil || !strings.Contains(out, "attached") {
		t.Errorf("uid 107 attaching to the tap: %v: %s", err, out)
	}
	if out, err := open(108); err == nil || !strings.Contains(out, "operation not permitted") {
		t.Errorf("uid 108 attaching to the tap: %v: %s; want EPERM", err, out)
	}
	if _, err := e.cnitool("del", ns); err != nil {
		t.Fatal(err)
	}
}

// TestHostCNIChained: ADD chained after another plugin passes its
// prevResult through (interfaces, IPs, DNS) and appends the tap, at the
// configuration's version.
func TestHostCNIChained(t *testing.T) {
	e := setup(t, tapConf)
	ns := e.newNetns()
	conf := `{"cniVersion":"1.0.0","name":"nctl","type":"netctl","prevResult":{"cniVersion":"1.0.0",` +
		`"interfaces":[{"name":"vlan0","sandbox":"` + ns + `"}],"ips":[{"address":"10.0.0.2/24","interface":0}],` +
		`"dns":{"nameservers":["10.0.0.10"]}}}`
	var out bytes.Buffer
	p := &Plugin{Host: hostnic.Real{CacheDir: e.run}, Stdout: &out}
	args := &skel.CmdArgs{ContainerID: "chain1", Netns: ns, IfName: "eth0", StdinData: []byte(conf)}
	if err := p.Add(args); err != nil {
		t.Fatal(err)
	}
	var r struct {
		CNIVersion string `json:"cniVersion"`
		Interfaces []struct{ Name, Sandbox string }
		IPs        []struct {
			Address   string
			Interface *int
		}
		DNS struct{ Nameservers []string }
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("result %s: %v", out.String(), err)
	}
	if r.CNIVersion != "1.0.0" || len(r.Interfaces) != 2 || r.Interfaces[0].Name != "vlan0" || r.Interfaces[1].Name != "eth0" ||
		r.Interfaces[1].Sandbox != ns || len(r.IPs) != 1 || r.IPs[0].Address != "10.0.0.2/24" || r.IPs[0].Interface == nil ||
		*r.IPs[0].Interface != 0 || len(r.DNS.Nameservers) != 1 {
		t.Errorf("chained result: %s", out.String())
	}
	if err := p.Del(args); err != nil {
		t.Fatal(err)
	}
	if got := linkNames(t, ns); strings.Join(got, " ") != "lo" {
		t.Errorf("pod after DEL: %v", got)
	}
}

// TestHostCNIToolKubeVirtName: in KubeVirt's binding flow (args.cni's
// logicNetworkName, as virt-controller passes it), ADD names the tap
// "tap" + the pod interface's hash, which KubeVirt's tap binding takes as
// the domain's target; the regular network's pod interface (here a veth
// pod<hash>) is left alone; CHECK and DEL find the tap by the same name.
func TestHostCNIToolKubeVirtName(t *testing.T) {
	e := setup(t, `{"cniVersion":"1.1.0","name":"nctl","plugins":[{"type":"netctl","queues":2,"args":{"cni":{"logicNetworkName":"default"}}}]}`)
	ns := e.newNetns()
	h := handle(t, ns)
	defer h.Close()
	// What KubeVirt calls network "default"'s pod interface
	// (namescheme.GenerateHashedInterfaceName: "pod" + sha256[:11]).
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "pod37a8eec1ce1"}, PeerName: "peer0"}); err != nil {
		t.Fatal(err)
	}
	out, err := e.cnitool("add", ns, "CNI_IFNAME=pod37a8eec1ce1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `"name": "tap37a8eec1ce1"`) {
		t.Errorf("ADD result: %s", out)
	}
	if l := link(t, ns, "tap37a8eec1ce1"); l == nil || l.Type() != "tuntap" || l.Attrs().Alias != hostnic.CNITapAlias {
		t.Fatalf("tap37a8eec1ce1 in the pod: %v", l)
	}
	if _, err := e.cnitool("check", ns, "CNI_IFNAME=pod37a8eec1ce1"); err != nil {
		t.Errorf("CHECK: %v", err)
	}
	if _, err := e.cnitool("del", ns, "CNI_IFNAME=pod37a8eec1ce1"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(linkNames(t, ns), " "); got != "lo peer0 pod37a8eec1ce1" {
		t.Errorf("pod after DEL: %s, want the regular network's veth only", got)
	}
}

// TestHostCNIMacvtapNetnsFIFO: a macvtap ADD whose CNI_NETNS is a FIFO
// (no namespace; opening it to read would block until the runtime's
// timeout kills the plugin, with the macvtap made in the runtime's
// namespace and not yet marked) fails at once, code 2 (ErrInvalidNetNS),
// and leaves the runtime's namespace as it was.
func TestHostCNIMacvtapNetnsFIFO(t *testing.T) {
	e := setup(t, tapConf)
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "lower0"}, PeerName: "lower1"}); err != nil {
		t.Fatal(err)
	}
	before := strings.Join(linkNames(t, ""), " ")
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	p := &Plugin{Host: hostnic.Real{CacheDir: e.run}, Stdout: io.Discard}
	args := &skel.CmdArgs{ContainerID: "fifo1", Netns: fifo, IfName: "eth0",
		StdinData: []byte(`{"cniVersion":"1.1.0","name":"nctl","type":"netctl","master":"lower0"}`)}
	// Add runs on this goroutine (its thread is in the test's namespace);
	// a timer lets a blocked open go by opening the FIFO's other end.
	var blocked atomic.Bool
	timer := time.AfterFunc(10*time.Second, func() {
		blocked.Store(true)
		if fd, err := unix.Open(fifo, unix.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
			unix.Close(fd)
		}
	})
	err := p.Add(args)
	timer.Stop()
	if blocked.Load() {
		t.Errorf("ADD blocked on the FIFO for 10s (then: %v)", err)
	}
	var te *types.Error
	if !errors.As(err, &te) || te.Code != types.ErrInvalidNetNS {
		t.Errorf("ADD: %v; want code %d", err, types.ErrInvalidNetNS)
	}
	if got := strings.Join(linkNames(t, ""), " "); got != before {
		t.Errorf("runtime namespace after ADD: %s, had %s", got, before)
	}
}

// TestHostCNIDelLeavesHookTap: a tap the libvirt hook made (alias "netctl
// hook tap", a running VM's) under the name DEL is given (a runtime
// that passes the node's namespace, or the hook in the pod) is not the
// plugin's: DEL leaves it, ADD refuses it (code 101), and the plugin's own
// tap carries a mark of its own (hostnic.CNITapAlias), which the hook's
// Reconnect does not take for one of its taps.
func TestHostCNIDelLeavesHookTap(t *testing.T) {
	e := setup(t, tapConf)
	ns := e.newNetns()
	var hookIdx int
	if err := inNetNS(ns, func() (err error) {
		hookIdx, err = hostnic.Real{}.CreateTap(hostnic.PersistentTap{Name: "vnet7", Owner: hostnic.NoOwner})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	p := &Plugin{Host: hostnic.Real{CacheDir: e.run}, Stdout: io.Discard}
	conf := []byte(`{"cniVersion":"1.1.0","name":"nctl","type":"netctl"}`)
	hookArgs := &skel.CmdArgs{ContainerID: "c1", Netns: ns, IfName: "vnet7", StdinData: conf}
	if err := p.Del(hookArgs); err != nil {
		t.Fatal(err)
	}
	if l := link(t, ns, "vnet7"); l == nil || l.Attrs().Index != hookIdx || l.Attrs().Alias != hostnic.TapAlias {
		t.Fatalf("the hook's tap after DEL: %v; want it left alone", l)
	}
	var te *types.Error
	if err := p.Add(hookArgs); !errors.As(err, &te) || te.Code != CodeConflict {
		t.Errorf("ADD over the hook's tap: %v; want code %d", err, CodeConflict)
	}
	args := &skel.CmdArgs{ContainerID: "c1", Netns: ns, IfName: "eth0", StdinData: conf}
	if err := p.Add(args); err != nil {
		t.Fatal(err)
	}
	if l := link(t, ns, "eth0"); l == nil || l.Attrs().Alias != hostnic.CNITapAlias {
		t.Fatalf("the plugin's tap: %v; want alias %q", l, hostnic.CNITapAlias)
	}
	if err := p.Del(args); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(linkNames(t, ns), " "); got != "lo vnet7" {
		t.Errorf("pod after DEL: %s; want lo vnet7", got)
	}
}

// TestHostCNIDelAfterKilledMacvtapAdd: what a macvtap ADD killed halfway
// leaves (simulated: the macvtap it makes under the attachment's own
// name, in the runtime's namespace before it is marked and moved; or in
// the pod's, moved and marked but not yet renamed) is deleted by the
// next DEL of that attachment, and another attachment's DEL leaves it.
func TestHostCNIDelAfterKilledMacvtapAdd(t *testing.T) {
	e := setup(t, tapConf)
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "lower0"}, PeerName: "lower1"}); err != nil {
		t.Fatal(err)
	}
	lower, err := netlink.LinkByName("lower0")
	if err != nil {
		t.Fatal(err)
	}
	ns := e.newNetns()
	conf := []byte(`{"cniVersion":"1.1.0","name":"nctl","type":"netctl","master":"lower0"}`)
	p := &Plugin{Host: hostnic.Real{CacheDir: e.run}, Stdout: io.Discard}
	args := &skel.CmdArgs{ContainerID: "killed1", Netns: ns, IfName: "eth0", StdinData: conf}
	other := &skel.CmdArgs{ContainerID: "other1", Netns: ns, IfName: "eth0", StdinData: conf}
	name := macvtapTempName(args.ContainerID, args.IfName)
	mk := func(h *netlink.Handle, alias string) {
		t.Helper()
		mv := &netlink.Macvtap{Macvlan: netlink.Macvlan{LinkAttrs: netlink.LinkAttrs{Name: name, ParentIndex: lower.Attrs().Index}, Mode: netlink.MACVLAN_MODE_BRIDGE}}
		if err := h.LinkAdd(mv); err != nil {
			t.Fatal(err)
		}
		if alias != "" {
			l, _ := h.LinkByName(name)
			h.LinkSetAlias(l, alias)
		}
	}
	// Killed before the mark: in the runtime's namespace, unmarked.
	rt, _ := netlink.NewHandle(unix.NETLINK_ROUTE)
	defer rt.Close()
	mk(rt, "")
	if err := p.Del(other); err != nil {
		t.Fatal(err)
	}
	if _, err := netlink.LinkByName(name); err != nil {
		t.Fatalf("another attachment's DEL deleted %s: %v", name, err)
	}
	if err := p.Del(args); err != nil {
		t.Fatal(err)
	}
	if _, err := netlink.LinkByName(name); err == nil {
		t.Errorf("%s in the runtime's namespace after DEL: still there", name)
	}
	// Killed after the move, before the rename: in the pod, marked. (A
	// macvtap cannot be made in a namespace without its lower device:
	// made here, then moved.)
	mk(rt, hostnic.MacvtapAlias)
	l, _ := netlink.LinkByName(name)
	podNS, err := hostnic.OpenNetNS(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer podNS.Close()
	if err := netlink.LinkSetNsFd(l, int(podNS)); err != nil {
		t.Fatal(err)
	}
	if err := p.Del(args); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(linkNames(t, ns), " "); got != "lo" {
		t.Errorf("pod after DEL: %s; want lo", got)
	}
	// ADD then works, and its DEL leaves nothing in either namespace.
	before := strings.Join(linkNames(t, ""), " ")
	if err := p.Add(args); err != nil {
		t.Fatal(err)
	}
	if err := p.Del(args); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(linkNames(t, ns), " "); got != "lo" {
		t.Errorf("pod after ADD and DEL: %s; want lo", got)
	}
	if got := strings.Join(linkNames(t, ""), " "); got != before {
		t.Errorf("runtime namespace after ADD and DEL: %s, had %s", got, before)
	}
}

// TestHostCNIDelRefusedConfig: DEL with a configuration this netctl
// refuses (a key a later runtime adds, a value an older netctl took: the
// runtime passes the configuration ADD had) still deletes what ADD made,
// by its name and mark, and succeeds, so that the pod can go; the
// netctl binary answers the same (its early check lets DEL by).
func TestHostCNIDelRefusedConfig(t *testing.T) {
	e := setup(t, tapConf)
	ns := e.newNetns()
	if _, err := e.cnitool("add", ns); err != nil {
		t.Fatal(err)
	}
	e.writeConf(`{"cniVersion":"1.1.0","name":"nctl","plugins":[{"type":"netctl","queues":4,"mtu":1400,"futureKey":1}]}`)
	if out, err := e.cnitool("del", ns); err != nil {
		t.Fatalf("DEL with a configuration netctl refuses: %v %s", err, out)
	}
	if got := strings.Join(linkNames(t, ns), " "); got != "lo" {
		t.Errorf("pod after DEL: %s; want lo", got)
	}
	// In-process, KubeVirt's name: found through the lenient read of args.
	p := &Plugin{Host: hostnic.Real{CacheDir: e.run}, Stdout: io.Discard}
	good := `{"cniVersion":"1.1.0","name":"nctl","type":"netctl","args":{"cni":{"logicNetworkName":"default"}}}`
	args := &skel.CmdArgs{ContainerID: "c2", Netns: ns, IfName: "eth1", StdinData: []byte(good)}
	if err := p.Add(args); err != nil {
		t.Fatal(err)
	}
	args.StdinData = []byte(`{"cniVersion":"1.1.0","name":"nctl","type":"netctl","queues":0,"args":{"cni":{"logicNetworkName":"default"}}}`)
	if err := p.Del(args); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	if got := strings.Join(linkNames(t, ns), " "); got != "lo" {
		t.Errorf("pod after DEL: %s; want lo", got)
	}
}

// TestHostCNIOwnNetns: CNI_NETNS naming the plugin's own namespace (the
// node's, for a runtime's plugin) without CNI_NETNS_OVERRIDE is refused
// before anything is made (skel v1.3.0 checks it only after ADD and DEL
// ran): ADD answers code 8 alone (not a result and then an error) and
// leaves no tap in that namespace; DEL deletes nothing there. With
// CNI_NETNS_OVERRIDE=1 (the runtime really asks) ADD and DEL work there.
func TestHostCNIOwnNetns(t *testing.T) {
	e := setup(t, tapConf)
	conf := `{"cniVersion":"1.1.0","name":"n","type":"netctl"}`
	// This namespace, bound at a file as a runtime binds a pod's (not
	// /proc/self/ns/net: the plugin's main thread may be left in its
	// probe's scratch namespace, macvtap.ProbeOffloads).
	own := filepath.Join(t.TempDir(), "own")
	os.WriteFile(own, nil, 0o644)
	if err := unix.Mount("/proc/thread-self/ns/net", own, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(own, unix.MNT_DETACH)
	run := func(cmdName string, extra ...string) (string, error) {
		cmd := exec.Command(filepath.Join(e.bin, "netctl"))
		cmd.Env = append([]string{"CNI_COMMAND=" + cmdName, "CNI_CONTAINERID=own1", "CNI_NETNS=" + own, "CNI_IFNAME=own0",
			"CNI_PATH=" + e.bin, "NETCTL_RUN_DIR=" + e.run}, extra...)
		cmd.Stdin = strings.NewReader(conf)
		out, err := cmd.Output()
		return string(out), err
	}
	before := strings.Join(linkNames(t, ""), " ")
	out, err := run("ADD")
	var got struct {
		Code    uint   `json:"code"`
		Msg     string `json:"msg"`
		Details string `json:"details"`
	}
	d := json.NewDecoder(strings.NewReader(out))
	d.DisallowUnknownFields()
	if derr := d.Decode(&got); err == nil || derr != nil || got.Code != 8 || d.More() {
		t.Errorf("ADD in the plugin's own namespace: %v; stdout %s; want exit 1 and CNI error code 8 alone", err, out)
	}
	if !strings.Contains(got.Msg, "CNI_NETNS_OVERRIDE") {
		t.Errorf("ADD's message %q: want it to name CNI_NETNS_OVERRIDE", got.Msg)
	}
	if after := strings.Join(linkNames(t, ""), " "); after != before {
		t.Errorf("the plugin's namespace after the refused ADD: %s, had %s", after, before)
		netlink.LinkDel(&netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Name: "own0"}})
	}
	// A tap of the plugin's own there: a refused DEL leaves it.
	if out, err := run("ADD", "CNI_NETNS_OVERRIDE=1"); err != nil {
		t.Fatalf("ADD with CNI_NETNS_OVERRIDE=1: %v %s", err, out)
	}
	if l, err := netlink.LinkByName("own0"); err != nil || l.Attrs().Alias != hostnic.CNITapAlias {
		t.Fatalf("own0 after ADD with the override: %v %v", l, err)
	}
	if out, err := run("DEL"); err == nil {
		t.Errorf("DEL in the plugin's own namespace without the override: succeeded (%s)", out)
	}
	if _, err := netlink.LinkByName("own0"); err != nil {
		t.Errorf("own0 after the refused DEL: %v; want it left", err)
	}
	if _, err := run("DEL", "CNI_NETNS_OVERRIDE=1"); err != nil {
		t.Errorf("DEL with the override: %v", err)
	}
	if after := strings.Join(linkNames(t, ""), " "); after != before {
		t.Errorf("after DEL with the override: %s, had %s", after, before)
	}
}
