package cni

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/hostnic"
	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/policy/host"
)

// Plugin-specific CNI error codes (the spec leaves 100 and up to plugins).
const (
	// CodeNotAvailable: this host cannot make what the configuration
	// asks (no such lower or management device, a backend not here).
	CodeNotAvailable uint = 100
	// CodeConflict: a link or device of that name exists and is not
	// netctl's.
	CodeConflict uint = 101
)

// Timeout bounds one command (the probe, a vdpa device's creation).
const Timeout = 60 * time.Second

// Plugin runs the CNI commands on this host.
type Plugin struct {
	Host hostnic.Real
	Log  io.Writer // stderr: the decision and what was made
	// Stdout is where ADD prints its result (os.Stdout when nil).
	Stdout io.Writer
}

// Funcs are the commands for skel.PluginMainFuncs.
func (p *Plugin) Funcs() skel.CNIFuncs {
	return skel.CNIFuncs{Add: p.Add, Del: p.Del, Check: p.Check, Status: p.Status}
}

// About is the plugin's line for a run without CNI_COMMAND.
const About = "netctl CNI plugin: a tap, macvtap or vdpa device with netctl's offloads and queues (netctl cni; README: netctl cni)"

func (p *Plugin) logf(format string, args ...any) {
	if p.Log != nil {
		fmt.Fprintf(p.Log, "netctl cni: "+format+"\n", args...)
	}
}

// cniErr turns an error into the CNI error skel prints.
func cniErr(err error) error {
	if err == nil {
		return nil
	}
	var ce *ConfigError
	if errors.As(err, &ce) {
		return ce.CNI()
	}
	var te *types.Error
	if errors.As(err, &te) {
		return te
	}
	code := types.ErrInternal
	switch {
	case errors.Is(err, errNetNSGone), errors.Is(err, errNotNetNS):
		code = types.ErrInvalidNetNS
	case errors.Is(err, errs.ErrConflict):
		code = CodeConflict
	case errors.Is(err, errs.ErrNotAvailable), errors.Is(err, errs.ErrNotSupported):
		code = CodeNotAvailable
	case errors.Is(err, errs.ErrInvalid):
		code = types.ErrInvalidNetworkConfig
	}
	return types.NewError(code, "netctl: "+err.Error(), "")
}

// attachment is one command's configuration and environment.
type attachment struct {
	cfg  *Config
	args *skel.CmdArgs
	pool *policy.Pool
}

func (p *Plugin) load(args *skel.CmdArgs) (*attachment, error) {
	cfg, err := ParseConfig(args.StdinData)
	if err != nil {
		return nil, err
	}
	if !ValidIfname(args.IfName) {
		return nil, types.NewError(types.ErrInvalidEnvironmentVariables,
			fmt.Sprintf("netctl: CNI_IFNAME %.32q: a link name of 1 to 15 characters, no '/', ':' or spaces", args.IfName), "CNI_IFNAME")
	}
	if m, err := argsMAC(args.Args); err != nil {
		return nil, err
	} else if m != nil && cfg.MAC == nil {
		cfg.MAC = m
	}
	if cfg.Conf.RawPrevResult != nil {
		if err := version.ParsePrevResult(&cfg.Conf); err != nil {
			return nil, &ConfigError{Code: types.ErrDecodingFailure, Msg: fmt.Sprintf("netctl: prevResult: %v: the runtime passes the previous plugin's result as is", err)}
		}
	}
	a := &attachment{cfg: cfg, args: args}
	if cfg.Plan != "" {
		b, err := readBounded(cfg.Plan, policy.MaxPlanFile, true)
		if err != nil {
			return nil, &ConfigError{Code: types.ErrInvalidNetworkConfig,
				Msg:     fmt.Sprintf("netctl: plan %s: %v: write it on the node with netctl plan -j", cfg.Plan, err),
				Details: fmt.Sprintf("%q: %q", "plan", cfg.Plan)}
		}
		if a.pool, err = policy.ParsePlanFile(b); err != nil {
			return nil, &ConfigError{Code: types.ErrInvalidNetworkConfig,
				Msg:     fmt.Sprintf("netctl: plan %s: %v", cfg.Plan, err),
				Details: fmt.Sprintf("%q: %q", "plan", cfg.Plan)}
		}
	}
	return a, nil
}

// readBounded reads at most limit bytes of the regular file at path
// (symlinks followed). The path is opened O_PATH first: a FIFO (whose
// open blocks until a writer comes) or a device is never opened for
// reading. With trusted, the file must be writable by root (or this
// user) alone: netctl decides on what it holds.
func readBounded(path string, limit int64, trusted bool) ([]byte, error) {
	pfd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("not a regular file (mode %#o)", st.Mode&unix.S_IFMT)
	}
	if trusted {
		euid := uint32(os.Geteuid())
		switch {
		case st.Uid != 0 && st.Uid != euid:
			return nil, fmt.Errorf("owned by uid %d, not root: others can write it; chown root it", st.Uid)
		case st.Mode&0o002 != 0, st.Mode&0o020 != 0 && st.Gid != 0:
			return nil, fmt.Errorf("mode %#o: others can write it; chmod go-w it", st.Mode&0o777)
		}
	}
	fd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(pfd), unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err == nil && int64(len(b)) > limit {
		err = fmt.Errorf("more than %d bytes", limit)
	}
	return b, err
}

// argsMAC is CNI_ARGS' MAC (K=V;K2=V2; other keys are the runtime's).
func argsMAC(s string) (net.HardwareAddr, error) {
	if len(s) > 64<<10 {
		return nil, types.NewError(types.ErrInvalidEnvironmentVariables, "netctl: CNI_ARGS of more than 64 KiB", "CNI_ARGS")
	}
	for _, kv := range strings.Split(s, ";") {
		k, v, _ := strings.Cut(kv, "=")
		if k != "MAC" {
			continue
		}
		m, err := net.ParseMAC(v)
		if err != nil || len(m) != 6 || m[0]&1 != 0 {
			return nil, types.NewError(types.ErrInvalidEnvironmentVariables,
				fmt.Sprintf("netctl: CNI_ARGS MAC=%.32q: a unicast Ethernet address such as 02:00:00:00:00:01", v), "CNI_ARGS")
		}
		return m, nil
	}
	return nil, nil
}

// vdpaName is the vdpa device netctl makes for an attachment: derived
// from the container and interface, so that DEL finds it without a
// record, and prefixed netctl- so that no other device is taken for it.
func vdpaName(containerID, ifname string) string {
	h := sha256.Sum256([]byte(containerID + "\x00" + ifname))
	return hostnic.VDPAName(hex.EncodeToString(h[:])[:16])
}

// Add makes what the decision picks in the pod's namespace.
func (p *Plugin) Add(args *skel.CmdArgs) error {
	if err := ownNetNS(args); err != nil {
		return err
	}
	a, err := p.load(args)
	if err != nil {
		return cniErr(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	iface, err := p.add(ctx, a)
	if err != nil {
		return cniErr(err)
	}
	res := &types100.Result{CNIVersion: types100.ImplementedSpecVersion}
	if a.cfg.Conf.PrevResult != nil {
		if res, err = types100.NewResultFromResult(a.cfg.Conf.PrevResult); err != nil {
			return cniErr(fmt.Errorf("prevResult: %w", err))
		}
	}
	res.Interfaces = append(res.Interfaces, iface)
	if a.cfg.Conf.PrevResult == nil {
		res.DNS = a.cfg.Conf.DNS
	}
	out := p.Stdout
	if out == nil {
		out = os.Stdout
	}
	r, err := res.GetAsVersion(a.cfg.CNIVersion)
	if err == nil {
		err = r.PrintTo(out)
	}
	if err != nil {
		p.Del(args) // the runtime gets no result: nothing may stay
		return cniErr(fmt.Errorf("the result: %w", err))
	}
	return nil
}

// decide asks policy about the attachment: the backend preference, the
// profile, the queues and the pool's plan, on the probed host (for a vdpa
// device, on the device just made).
func (p *Plugin) decide(ctx context.Context, a *attachment, vdev *host.VDPADevice) (policy.Decision, error) {
	desc, err := p.Host.Probe(ctx, hostnic.ProbeSpec{Macvtap: a.cfg.Kind == KindMacvtap})
	if err != nil {
		return policy.Decision{}, fmt.Errorf("probing the host: %w", err)
	}
	h := *desc
	req := policy.Request{Queues: a.cfg.Queues, Profile: a.cfg.Profile, Backend: a.cfg.Backend, Pool: a.pool}
	switch a.cfg.Kind {
	case KindVDPA:
		req.Backend = policy.BackendVDPA
		h.VDPA.Available = true
		h.VDPA.MgmtDevs = []string{a.cfg.Mgmtdev}
		h.VDPA.Devices = nil
		if vdev != nil {
			h.VDPA.Devices = append(h.VDPA.Devices, *vdev)
		}
	default:
		h.VDPA.Available = false
		h.VDPA.Error = "the configuration names no \"mgmtdev\": netctl makes a " + string(a.cfg.Kind) + ", not a vdpa device"
		if a.cfg.Kind == KindMacvtap {
			h.Tap.Available, h.Tap.Error, h.Tap.Offloads = desc.Macvtap.Available, desc.Macvtap.Error, desc.Macvtap.Offloads
		}
	}
	d, err := policy.Decide(&h, req)
	if err != nil {
		return d, err
	}
	var chosen string
	for _, s := range d.Steps {
		if s.Chosen {
			chosen = s.Reason
		}
	}
	p.logf("%s %s: backend %s (%s), profile %s, %d queue pair(s); offers %s", a.args.ContainerID, a.args.IfName, d.Backend, chosen,
		cmpOr(a.cfg.Profile, policy.Throughput), a.cfg.Queues, strings.Join(d.OfferNames, "|"))
	for _, n := range d.Notes {
		p.logf("%s %s: %s", a.args.ContainerID, a.args.IfName, n)
	}
	return d, nil
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (p *Plugin) add(ctx context.Context, a *attachment) (*types100.Interface, error) {
	switch a.cfg.Kind {
	case KindVDPA:
		return p.addVDPA(ctx, a)
	case KindMacvtap:
		return p.addMacvtap(ctx, a)
	}
	if _, err := p.decide(ctx, a, nil); err != nil {
		return nil, err
	}
	return p.addTap(a)
}

// addTap makes the persistent tap CNI_IFNAME in the pod's namespace.
func (p *Plugin) addTap(a *attachment) (*types100.Interface, error) {
	name := a.cfg.LinkName(a.args.IfName)
	var iface *types100.Interface
	err := inNetNS(a.args.Netns, func() error {
		ifindex, err := p.Host.CreateTap(hostnic.PersistentTap{Name: name, Queues: a.cfg.Queues, MTU: a.cfg.MTU, Owner: a.cfg.Owner,
			Alias: hostnic.CNITapAlias})
		if err != nil {
			return err
		}
		ok := false
		defer func() {
			if !ok {
				p.Host.DeleteLink(name, ifindex)
			}
		}()
		if a.cfg.MAC != nil {
			if err := macvtap.SetLinkMAC(name, a.cfg.MAC); err != nil {
				return err
			}
		}
		if err := macvtap.LinkUp(name); err != nil {
			return err
		}
		l, err := netlink.LinkByIndex(ifindex)
		if err != nil {
			return fmt.Errorf("tap %s: %w", name, err)
		}
		iface = &types100.Interface{Name: name, Mac: l.Attrs().HardwareAddr.String(), Mtu: l.Attrs().MTU, Sandbox: a.args.Netns}
		ok = true
		p.logf("%s %s: created tap %s (ifindex %d, %d queue(s), vnet_hdr, owner %d, mtu %d) in %s", a.args.ContainerID, name, name,
			ifindex, a.cfg.Queues, a.cfg.Owner, l.Attrs().MTU, a.args.Netns)
		return nil
	})
	return iface, err
}

// addMacvtap makes a macvtap on master in the runtime's namespace and
// moves it, marked, into the pod's as CNI_IFNAME.
func (p *Plugin) addMacvtap(ctx context.Context, a *attachment) (*types100.Interface, error) {
	if _, err := p.decide(ctx, a, nil); err != nil {
		return nil, err
	}
	if _, err := netlink.LinkByName(a.cfg.Master); err != nil {
		return nil, fmt.Errorf("master %s: %v: name the lower device as it is called in the node's namespace (ip link): %w", a.cfg.Master, err, errs.ErrNotAvailable)
	}
	mac := a.cfg.MAC
	if mac == nil {
		mac = hostnic.RandomMAC()
	}
	// Under the attachment's own name: an ADD killed before the move
	// leaves it unmarked in this namespace, where DEL looks for it.
	l, err := p.Host.CreateMacvtap(hostnic.MacvtapSpec{Name: macvtapTempName(a.args.ContainerID, a.args.IfName), Lower: a.cfg.Master,
		Mode: a.cfg.Mode, Queues: a.cfg.Queues, MTU: a.cfg.MTU, MAC: mac})
	if err != nil {
		return nil, err
	}
	name, ifindex := l.Name(), l.Ifindex()
	if err := l.Release(); err != nil {
		l.Destroy()
		return nil, err
	}
	link := a.cfg.LinkName(a.args.IfName)
	idx, err := hostnic.MoveMarkedLink(name, ifindex, hostnic.MacvtapAlias, a.args.Netns, link)
	if err != nil {
		return nil, err
	}
	p.logf("%s %s: created macvtap %s on %s (ifindex %d in %s, %d queue(s), mac %s)", a.args.ContainerID, a.args.IfName, link, a.cfg.Master, idx, a.args.Netns, a.cfg.Queues, mac)
	iface := &types100.Interface{Name: link, Mac: mac.String(), Sandbox: a.args.Netns}
	if a.cfg.MTU != 0 {
		iface.Mtu = a.cfg.MTU
	}
	return iface, nil
}

// addVDPA makes the vdpa device, decides on its features, and publishes
// it in the device-info file.
func (p *Plugin) addVDPA(ctx context.Context, a *attachment) (*types100.Interface, error) {
	name := vdpaName(a.args.ContainerID, a.args.IfName)
	spec := hostnic.VDPASpec{Name: name, Mgmtdev: a.cfg.Mgmtdev, MAC: a.cfg.MAC, MTU: a.cfg.MTU, MACOptional: true, Pin: a.pool}
	if a.cfg.Queues > 1 {
		spec.MaxVQP = a.cfg.Queues
	}
	vhost, err := p.Host.CreateVDPA(ctx, spec)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
			p.Host.DeleteVDPA(dctx, name)
			cancel()
		}
	}()
	dev, err := p.Host.DescribeVDPA(ctx, name)
	if err != nil {
		return nil, err
	}
	if _, err := p.decide(ctx, a, &dev); err != nil {
		return nil, err
	}
	mac, _ := p.Host.VDPAMAC(ctx, name)
	if mac == nil {
		mac = a.cfg.MAC
	}
	if a.cfg.DeviceInfoFile != "" {
		if err := writeDeviceInfo(a.cfg.DeviceInfoFile, name, vhost); err != nil {
			return nil, err
		}
	}
	ok = true
	p.logf("%s %s: created vdpa %s from %s (%s)", a.args.ContainerID, a.args.IfName, name, a.cfg.Mgmtdev, vhost)
	iface := &types100.Interface{Name: name}
	if mac != nil {
		iface.Mac = mac.String()
	}
	return iface, nil
}

// Del deletes what ADD made, if it is still there and netctl's.
func (p *Plugin) Del(args *skel.CmdArgs) error {
	if !ValidIfname(args.IfName) {
		return nil // ADD refused it: nothing was made
	}
	if err := ownNetNS(args); err != nil {
		return err
	}
	cfg, err := ParseConfig(args.StdinData)
	lenient := err != nil
	if lenient {
		// The configuration ADD had, which this netctl refuses (a key a
		// later runtime adds, a value an older netctl took): a failing
		// DEL would keep the pod for ever. What ADD made is found by the
		// attachment's names and netctl's marks alone; every kind is
		// looked for.
		p.logf("%s %s: DEL with a configuration netctl refuses (%v): deleting what netctl made for the attachment by its names and marks",
			args.ContainerID, args.IfName, err)
		cfg = lenientConfig(args.StdinData)
	}
	if cfg.Kind == KindVDPA || lenient {
		name := vdpaName(args.ContainerID, args.IfName)
		if p.Host.VDPAExists(name) {
			ctx, cancel := context.WithTimeout(context.Background(), Timeout)
			defer cancel()
			if err := p.Host.DeleteVDPA(ctx, name); err != nil {
				return cniErr(err)
			}
			if cfg.DeviceInfoFile != "" {
				removeDeviceInfo(cfg.DeviceInfoFile, name)
			}
			p.logf("%s %s: deleted vdpa %s", args.ContainerID, args.IfName, name)
		}
		if !lenient {
			return nil
		}
	}
	// What an ADD killed halfway left in the runtime's namespace: the
	// macvtap of this attachment's name, before its move.
	tmp := macvtapTempName(args.ContainerID, args.IfName)
	if l, err := netlink.LinkByName(tmp); err == nil && l.Type() == "macvtap" {
		if err := p.Host.DeleteLink(tmp, l.Attrs().Index); err != nil {
			return cniErr(err)
		}
		p.logf("%s %s: deleted macvtap %s, left by an ADD that did not finish", args.ContainerID, args.IfName, tmp)
	}
	if args.Netns == "" {
		return nil // the namespace is gone, and its links with it
	}
	name := cfg.LinkName(args.IfName)
	err = inNetNS(args.Netns, func() error {
		// Moved and marked but not renamed (an ADD killed halfway).
		if idx := hostnic.MarkedLinkIndex(tmp, "macvtap", hostnic.MacvtapAlias); idx != 0 {
			if err := p.Host.DeleteLink(tmp, idx); err != nil {
				return err
			}
			p.logf("%s %s: deleted macvtap %s in %s, left by an ADD that did not finish", args.ContainerID, args.IfName, tmp, args.Netns)
		}
		// Either kind, whatever the configuration says now: it may have
		// changed since ADD.
		if idx := hostnic.MarkedLinkIndex(name, "macvtap", hostnic.MacvtapAlias); idx != 0 {
			if err := p.Host.DeleteLink(name, idx); err != nil {
				return err
			}
			p.logf("%s %s: deleted macvtap %s in %s", args.ContainerID, args.IfName, name, args.Netns)
			return nil
		}
		// Only the plugin's mark: a tap of the hook's (a VM's, TapAlias)
		// under that name is not this attachment's.
		if idx := hostnic.MarkedLinkIndex(name, "tuntap", hostnic.CNITapAlias); idx != 0 {
			if err := p.Host.DeleteLink(name, idx); err != nil {
				return err
			}
			p.logf("%s %s: deleted tap %s in %s", args.ContainerID, args.IfName, name, args.Netns)
		}
		return nil
	})
	if errors.Is(err, errNetNSGone) {
		return nil
	}
	return cniErr(err)
}

// Check verifies that what ADD made is there as the configuration says.
func (p *Plugin) Check(args *skel.CmdArgs) error {
	a, err := p.load(args)
	if err != nil {
		return cniErr(err)
	}
	if a.cfg.Conf.PrevResult == nil {
		return cniErr(&ConfigError{Code: types.ErrInvalidNetworkConfig, Msg: "netctl: CHECK without a prevResult: the runtime passes ADD's result"})
	}
	prev, err := types100.NewResultFromResult(a.cfg.Conf.PrevResult)
	if err != nil {
		return cniErr(fmt.Errorf("prevResult: %w", err))
	}
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	if a.cfg.Kind == KindVDPA {
		name := vdpaName(args.ContainerID, args.IfName)
		if _, err := hostnic.BoundVhostPath(name); err != nil {
			return cniErr(fmt.Errorf("vdpa %s (made by ADD): %w", name, err))
		}
		return nil
	}
	name := a.cfg.LinkName(args.IfName)
	var want *types100.Interface
	for _, i := range prev.Interfaces {
		if i.Name == name && i.Sandbox == args.Netns {
			want = i
		}
	}
	if want == nil {
		return cniErr(fmt.Errorf("prevResult lists no interface %s in %s: netctl made none there: %w", name, args.Netns, errs.ErrInvalid))
	}
	if _, err := p.decide(ctx, a, nil); err != nil {
		return cniErr(fmt.Errorf("the decision ADD made no longer holds: %w", err))
	}
	return cniErr(inNetNS(args.Netns, func() error { return checkLink(a.cfg, name, want) }))
}

// checkLink compares link name with the configuration and ADD's result.
func checkLink(cfg *Config, name string, want *types100.Interface) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("%s: %v: it is gone; delete and add the pod's network again: %w", name, err, errs.ErrNotAvailable)
	}
	var bad []string
	switch cfg.Kind {
	case KindMacvtap:
		if l.Type() != "macvtap" || l.Attrs().Alias != hostnic.MacvtapAlias {
			bad = append(bad, fmt.Sprintf("it is a %s link with alias %q, not netctl's macvtap", l.Type(), l.Attrs().Alias))
		}
	default:
		t, ok := l.(*netlink.Tuntap)
		switch {
		case !ok || t.Mode != netlink.TUNTAP_MODE_TAP || t.Attrs().Alias != hostnic.CNITapAlias:
			bad = append(bad, fmt.Sprintf("it is a %s link with alias %q, not netctl's tap", l.Type(), l.Attrs().Alias))
		default:
			if t.Flags&netlink.TUNTAP_VNET_HDR == 0 {
				bad = append(bad, "vnet_hdr is off")
			}
			if mq := t.Flags&netlink.TUNTAP_MULTI_QUEUE != 0; mq != (cfg.Queues > 1) {
				bad = append(bad, fmt.Sprintf("multi_queue is %v for %d queue pair(s)", mq, cfg.Queues))
			}
			// Queues attached (QEMU's, while it runs): none, or as many as
			// the configuration's queue pairs.
			if n := t.Queues + t.DisabledQueues; n != 0 && n != cfg.Queues {
				bad = append(bad, fmt.Sprintf("%d queue(s) attached, not %d (the VM's queues must match \"queues\")", n, cfg.Queues))
			}
			if int(t.Owner) != cfg.Owner {
				bad = append(bad, fmt.Sprintf("owner is %d, not %d", t.Owner, cfg.Owner))
			}
		}
	}
	if cfg.MTU != 0 && l.Attrs().MTU != cfg.MTU {
		bad = append(bad, fmt.Sprintf("mtu is %d, not %d", l.Attrs().MTU, cfg.MTU))
	}
	if want.Mac != "" && !strings.EqualFold(l.Attrs().HardwareAddr.String(), want.Mac) {
		bad = append(bad, fmt.Sprintf("mac is %s, not %s", l.Attrs().HardwareAddr, want.Mac))
	}
	if len(bad) > 0 {
		return fmt.Errorf("%s: %s: delete and add the pod's network again: %w", name, strings.Join(bad, "; "), errs.ErrInvalid)
	}
	return nil
}

// Status says whether ADD can work: /dev/net/tun for a tap or macvtap.
func (p *Plugin) Status(args *skel.CmdArgs) error {
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return types.NewError(50, fmt.Sprintf("netctl: /dev/net/tun: %v: load the tun module (modprobe tun)", err), "")
	}
	return nil
}

// lenientConfig is what DEL reads of a configuration ParseConfig
// refuses: KubeVirt's network name, which names the link (no device-info
// file: its path is not checked, so no file is removed).
func lenientConfig(b []byte) *Config {
	var raw struct {
		Args struct {
			CNI struct {
				Logic string `json:"logicNetworkName"`
			} `json:"cni"`
		} `json:"args"`
	}
	c := &Config{}
	if len(b) <= MaxConfig && json.Unmarshal(b, &raw) == nil && len(raw.Args.CNI.Logic) <= 253 {
		c.LogicNetwork = raw.Args.CNI.Logic
	}
	return c
}

// macvtapTempName is the name a macvtap ADD makes in the runtime's
// namespace, before it is marked, moved and renamed: derived from the
// attachment, so that DEL finds what an ADD killed halfway left.
func macvtapTempName(containerID, ifname string) string {
	h := sha256.Sum256([]byte(containerID + "\x00" + ifname))
	return "nctlc" + hex.EncodeToString(h[:])[:10]
}
