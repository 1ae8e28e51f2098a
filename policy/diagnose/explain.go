package diagnose

import (
	"fmt"
	"slices"
	"strings"

	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/virtio"
)

// Row is one feature bit's story.
type Row struct {
	Feature string `json:"feature"`
	Bit     uint   `json:"bit"`
	Offered bool   `json:"offered"` // by QEMU's device (host features)
	Acked   bool   `json:"acked"`   // by the guest's driver
	Backend string `json:"backend"` // honoured by the backend: yes, no, "?" (could not check) or "-" (nothing to honour)
	Lower   string `json:"lower"`   // the lower device does it in hardware: yes, no, or "-"
	Verdict string `json:"verdict"` // on or off
	Reason  string `json:"reason"`
	// Layer names what turned an off bit off: "cmdline" (a property set
	// off on QEMU's command line), "property" (a property that reads off),
	// "qemu" (QEMU's version has no such property), "vhost-net" (the
	// kernel's vhost-net did not offer it), "tap" (the tap or macvtap, or
	// tun on this kernel), "vdpa", "dependency" (a bit it needs is off:
	// virtio spec 5.1.3.1), "guest" or "backend". Empty for bits that
	// are on, and where nothing tells.
	Layer string `json:"layer,omitempty"`
}

// Line is the row in one line: "GUEST_USO4 off: tun on 6.1 refuses ...".
func (r Row) Line() string { return r.Feature + " " + r.Verdict + ": " + r.Reason }

// Word is a feature word in hex and by name.
type Word struct {
	Hex   string   `json:"hex"`
	Names []string `json:"names"`
}

func word(f virtio.Features) Word {
	return Word{Hex: fmt.Sprintf("%#x", uint64(f)), Names: orEmpty(f.Names())}
}

// Report is what netctl diagnose prints.
type Report struct {
	NIC     string   `json:"nic"`
	QEMU    string   `json:"qemu,omitempty"`
	Kernel  string   `json:"kernel,omitempty"` // the host's
	Backend string   `json:"backend"`
	Status  []string `json:"status"`
	Host    Word     `json:"host_features"`  // offered by the device
	Guest   Word     `json:"guest_features"` // acknowledged by the guest
	// BackendWord is QEMU's backend-features word (set when a vhost
	// backend took part in negotiation).
	BackendWord Word   `json:"backend_features"`
	Header      string `json:"vnet_hdr,omitempty"`
	Features    []Row  `json:"features"`
	// Off lists the offloads that are off, one line each.
	Off   []string `json:"offloads_off"`
	Notes []string `json:"notes,omitempty"`
	// Pool is the NIC held against a pool's plan (CheckPool).
	Pool *PoolCheck `json:"pool,omitempty"`
}

type explainer struct {
	s                   *Snapshot
	hostProbe           *HostProbe // nil when the host was not probed
	q                   *qemuStatus
	host, guest         virtio.Features
	backend             virtio.Features // bits the backend negotiated, when it has a word of its own
	backendMask         virtio.Features // the bits that word speaks for
	hasBackendWord      bool
	vhostOffer          virtio.Features // what the kernel's vhost-net offered QEMU (vhost-dev.features)
	vhostAcked          virtio.Features // what QEMU acknowledged to it (vhost-dev.acked-features)
	hasVhostOffer       bool            // the NIC runs on kernel vhost-net and QMP said what it offered
	backendName, kernel string
	negotiated          bool
}

// Explain turns a snapshot into a report. It fails only when the snapshot
// holds no readable virtio-net status.
func Explain(s *Snapshot) (*Report, error) {
	q, err := parseStatus(s.Status)
	if err != nil {
		return nil, fmt.Errorf("diagnose: %w", err)
	}
	hp, err := s.HostProbe()
	if err != nil {
		return nil, fmt.Errorf("diagnose: %w", err)
	}
	e := &explainer{s: s, q: q, hostProbe: hp}
	r := &Report{NIC: s.NIC, QEMU: s.QEMU, Status: orEmpty(q.statuses()), Notes: append([]string{}, s.Errors...)}
	var unknown []string
	e.host, unknown = q.Host.word()
	var u2 []string
	e.guest, u2 = q.Guest.word()
	seen := map[string]bool{}
	for _, n := range append(unknown, u2...) {
		if !seen[n] {
			seen[n] = true
			r.Notes = append(r.Notes, "QEMU named a feature netctl does not know: "+n)
		}
	}
	// Legacy drivers go to DRIVER_OK without FEATURES_OK.
	e.negotiated = slices.Contains(r.Status, "FEATURES_OK") || slices.Contains(r.Status, "DRIVER_OK")
	if hp != nil {
		e.kernel = shortKernel(hp.Kernel)
		r.Kernel = hp.Kernel
	}
	e.describeBackend(r)
	bw, _ := q.Backend.word()
	r.Host, r.Guest, r.BackendWord = word(e.host), word(e.guest), word(bw)

	rows := map[uint]Row{}
	for _, o := range policy.Offloads {
		row := e.offloadRow(o)
		rows[row.Bit] = row
	}
	for _, b := range (e.host | e.guest | e.backend&e.backendMask | alwaysShown | e.defaultOffer()).Bits() {
		if _, done := rows[b]; !done {
			rows[b] = e.otherRow(virtio.Bit(b))
		}
	}
	e.followRequirements(rows)
	for b := uint(0); b < 64; b++ {
		if row, ok := rows[b]; ok {
			r.Features = append(r.Features, row)
			if row.Verdict == "off" && isOffload(virtio.Bit(b)) {
				r.Off = append(r.Off, row.Line())
			}
		}
	}
	r.Off = orEmpty(r.Off)
	return r, nil
}

// alwaysShown are the ring bits that matter for speed, shown even when
// nobody offered them.
const alwaysShown = virtio.EventIdx | virtio.IndirectDesc | virtio.NetMrgRxbuf | virtio.Version1 | virtio.NetMQ

// vhostKernelBits are the bits QEMU lets a kernel vhost-net veto
// (hw/net/vhost_net.c kernel_feature_bits): QEMU clears them from its offer
// when vhost-net lacks them.
const vhostKernelBits = virtio.NotifyOnEmpty | virtio.IndirectDesc | virtio.EventIdx | virtio.NetMrgRxbuf | virtio.Version1 |
	virtio.NetMTU | virtio.AccessPlatform | virtio.RingPacked | virtio.RingReset | virtio.InOrder | virtio.NotificationData |
	virtio.NetRSCExt | virtio.NetHashReport

// vdpaQEMUBits are the bits QEMU emulates for a vhost-vdpa device instead of
// passing them on (GUEST_ANNOUNCE; bit 30, VIRTIO_F_BAD_FEATURE).
const vdpaQEMUBits = virtio.NetGuestAnnounce | 1<<30

// shortKernel is the major.minor of a release ("6.1.0-57-amd64" -> "6.1").
func shortKernel(release string) string {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return release
	}
	minor := parts[1]
	if i := strings.IndexFunc(minor, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		minor = minor[:i]
	}
	return parts[0] + "." + minor
}

func isOffload(f virtio.Features) bool {
	return slices.ContainsFunc(policy.Offloads, func(o policy.Offload) bool { return o.F == f })
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (e *explainer) describeBackend(r *Report) {
	s := e.s
	vhost := e.q.VhostStarted || e.q.Vhost != nil
	if e.kernelVhost() {
		// QEMU acks to vhost-net exactly the guest's ring bits that
		// vhost-net offered, so only its offer explains anything. This
		// comes from QMP alone: it stands whether or not the tap was read.
		e.vhostOffer, _ = e.q.Vhost.Features.word()
		e.vhostAcked, _ = e.q.Vhost.AckedFeatures.word()
		e.hasVhostOffer = true
	}
	switch {
	case s.VDPA != nil:
		e.backendName = "vdpa device " + s.VDPA.Device
		r.Backend = "vhost-vdpa: " + s.VDPA.Device
		if s.VDPA.MgmtDev != "" {
			r.Backend += " (mgmtdev " + s.VDPA.MgmtDev + ")"
		}
		if s.VDPA.HasNegotiated {
			e.backend, e.hasBackendWord, e.backendMask = virtio.Features(s.VDPA.Negotiated), true, ^vdpaQEMUBits
		}
	case s.Tap != nil:
		kind := "tap"
		if s.Tap.Macvtap {
			kind = "macvtap"
		}
		e.backendName = kind + " " + s.Tap.Name
		mode := "vhost=off: QEMU moves the packets"
		if vhost {
			mode = "vhost=on: vhost-net moves the packets"
		}
		r.Backend = fmt.Sprintf("%s %s, %d queue(s), %s", kind, s.Tap.Name, s.Tap.Queues, mode)
		r.Header = e.header()
	case e.hasVhostOffer && (s.Netdev.Type == "" || s.Netdev.Type == "tap"):
		e.backendName = "vhost-net"
		r.Backend = "vhost=on: vhost-net moves the packets (QMP: vhost-started, vhost-dev); the tap was not read"
		if s.Netdev.Type == "" {
			r.Backend += " (with a saved reply, name it with --tap)"
		}
		r.Header = e.header()
	case s.Netdev.Type == "" && vhost && e.q.Vhost != nil:
		// A vhost device that offers offloads itself (kernelVhost).
		e.backendName = "the vhost device"
		r.Backend = "vhost=on: a vhost-user or vhost-vdpa device moves the packets (QMP: vhost-started, and its vhost-dev offers offloads itself); " +
			"no backend state was read"
	case s.Netdev.Type == "" && vhost:
		// QEMU prints vhost-dev whenever vhost started; a reply without
		// it still says vhost is on.
		e.backendName = "the vhost backend"
		r.Backend = "vhost=on: a vhost backend moves the packets (QMP: vhost-started, without vhost-dev to say which kind); " +
			"no backend state was read (with a saved reply, name the tap with --tap)"
	case s.Netdev.Type == "":
		e.backendName = "the backend"
		r.Backend = "unknown: no backend state was read (with a saved reply, name the tap with --tap)"
	default:
		e.backendName = "netdev " + s.Netdev.ID
		r.Backend = fmt.Sprintf("%s (netdev %s): netctl reads no backend state for this type", orDash(s.Netdev.Type), s.Netdev.ID)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// header says whether the tap's virtio-net header fits what was negotiated.
func (e *explainer) header() string {
	t := e.s.Tap
	if e.vhostAddsHeader() {
		size := 10
		if e.guest.Has(virtio.Version1) || e.guest.Has(virtio.NetMrgRxbuf) {
			size = 12
		}
		why := fmt.Sprintf("none on the tap (vnet_hdr=off): vhost-net acknowledged VHOST_NET_F_VIRTIO_NET_HDR "+
			"(QMP prints it as ANY_LAYOUT in vhost-dev acked-features) and adds and strips the guest's %d-byte header itself; "+
			"without a header on the tap QEMU offers no offloads", size)
		if !e.negotiated {
			why = "none on the tap (vnet_hdr=off): vhost-net acknowledged VHOST_NET_F_VIRTIO_NET_HDR " +
				"(QMP prints it as ANY_LAYOUT in vhost-dev acked-features) and adds and strips the guest's header itself; " +
				"without a header on the tap QEMU offers no offloads"
		}
		return why
	}
	if t == nil {
		return "on the tap: vhost-net did not acknowledge VHOST_NET_F_VIRTIO_NET_HDR, so the tap carries the guest's header (size not read)"
	}
	if !t.VnetHdr {
		return "none: the tap has no virtio-net header (vnet_hdr=off), so QEMU offers no offloads"
	}
	if t.HdrLen == 0 {
		return "on (size not read)"
	}
	want := 10
	if e.guest.Has(virtio.Version1) || e.guest.Has(virtio.NetMrgRxbuf) {
		want = 12
	}
	if e.guest.Has(virtio.NetHashReport) {
		want = 20 // struct virtio_net_hdr_v1_hash
	}
	if !e.negotiated {
		return fmt.Sprintf("%d bytes", t.HdrLen)
	}
	if t.HdrLen == want {
		return fmt.Sprintf("%d bytes, as the negotiated features need", t.HdrLen)
	}
	return fmt.Sprintf("%d bytes, but the negotiated features need %d: QEMU converts every packet (vhost cannot be used)", t.HdrLen, want)
}

func (e *explainer) tapHas(names []string) (bool, string) {
	for _, n := range names {
		if n == "ufo" {
			continue // tun takes TUN_F_UFO and shows nothing for it
		}
		if !slices.Contains(e.s.Tap.Offloads, n) {
			return false, n
		}
	}
	return true, ""
}

// tunRefuses says why the host's tun (or macvtap) cannot carry o, when
// it did not take one of the tap offloads o needs when probed; else "".
// Each bit names its own flag (policy.Offload.Refusal).
func (e *explainer) tunRefuses(o policy.Offload) string {
	h := e.hostProbe
	if h == nil {
		return ""
	}
	kind, offs, ok := "tun", h.Tap.Offloads, h.Tap.Available
	if e.s.Tap != nil && e.s.Tap.Macvtap {
		kind, offs, ok = "macvtap", h.Macvtap.Offloads, h.Macvtap.Available
	}
	if !ok {
		return ""
	}
	if n := o.Missing(offs); n != "" && n != "ufo" {
		return o.Refusal(kind, e.kernel, n)
	}
	return ""
}

func (e *explainer) offloadRow(o policy.Offload) Row {
	b := o.F.Bits()[0]
	row := Row{Feature: virtio.BitName(b), Bit: b, Offered: e.host.Has(o.F), Acked: e.guest.Has(o.F), Backend: "-", Lower: "-"}
	row.Lower = e.lower(o.F)
	switch {
	case !row.Offered:
		row.Verdict = "off"
		row.Layer, row.Reason = e.notOffered(o)
	case !row.Acked:
		row.Verdict, row.Layer, row.Reason = "off", "guest", e.notAcked(o.F, o.Needs)
	default:
		row.Backend, row.Reason = e.honoured(o)
		row.Verdict = "on"
		if row.Backend == "no" {
			row.Verdict, row.Layer = "off", "tap"
			if e.s.VDPA != nil {
				row.Layer = "vdpa"
			}
		}
	}
	if row.Verdict == "on" && row.Lower == "no" && !o.RX {
		row.Reason += fmt.Sprintf("; %s does not do it in hardware, so the host does it in software", e.lowerName())
	}
	return row
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func (e *explainer) lowerName() string {
	if e.s.VDPA != nil && e.s.VDPA.MgmtFeatures != 0 {
		return "the vdpa parent " + orDash(e.s.VDPA.MgmtDev)
	}
	if e.s.Lower != nil {
		return e.s.Lower.Name
	}
	return "the lower device"
}

func (e *explainer) lower(f virtio.Features) string {
	if e.s.VDPA != nil && e.s.VDPA.MgmtFeatures != 0 {
		return yesNo(virtio.Features(e.s.VDPA.MgmtFeatures).Has(f))
	}
	names, ok := lowerFeature[f]
	if e.s.Lower == nil || !ok {
		return "-"
	}
	for _, n := range names {
		if e.s.Lower.Features[n] {
			return "yes"
		}
	}
	return "no"
}

// notOffered explains why QEMU's device did not offer an offload, and
// names the layer that dropped it (see Row.Layer).
func (e *explainer) notOffered(o policy.Offload) (layer, why string) {
	props := e.s.Props
	on, has := props[o.Prop]
	if why := e.setOff(o.Prop); why != "" {
		return "cmdline", why
	}
	switch {
	case props != nil && has && !on:
		why := fmt.Sprintf("the NIC's property %s is off (-device virtio-net-pci,...,%s=off", o.Prop, o.Prop)
		if o.Libvirt != "" {
			why += "; libvirt: <driver>" + o.Libvirt
		}
		why += ")"
		if e.s.Cmdline != nil && e.s.Defaults[o.Prop] {
			why = fmt.Sprintf("the NIC's property %s is off although %s defaults to on and the command line does not set it: "+
				"the machine type's compat settings or a -global turn it off", o.Prop, orDash(e.s.Driver))
		} else if o.QEMU != "" {
			why += fmt.Sprintf(", or the machine type is older than %s (its compat settings turn it off)", o.QEMU)
		}
		return "property", why
	case props != nil && !has && o.QEMU != "":
		why := fmt.Sprintf("QEMU %s has no %s property: %s needs QEMU %s", orDash(e.s.QEMU), o.Prop, featureFamily(o.F), o.QEMU)
		if r := e.tunRefuses(o); r != "" {
			why += ", and " + r
		}
		return "qemu", why
	}
	if e.noHeader() {
		why := "the tap has no virtio-net header (vnet_hdr=off), so QEMU offers no offloads"
		if e.vhostAddsHeader() {
			why += "; vhost-net adds the guest's header itself (VHOST_NET_F_VIRTIO_NET_HDR)"
		}
		return "tap", why
	}
	if r := e.tunRefuses(o); r != "" && (e.s.Tap != nil || props != nil) {
		return "tap", r
	}
	if v := e.s.VDPA; v != nil && !virtio.Features(v.Features).Has(o.F) {
		return "vdpa", fmt.Sprintf("the vdpa device %s does not offer it", v.Device)
	}
	if props == nil {
		why := fmt.Sprintf("QEMU did not offer it: the NIC's %s property is off", o.Prop)
		if o.QEMU != "" {
			why += fmt.Sprintf(", or QEMU is older than %s (netctl had no NIC properties to tell which)", o.QEMU)
		}
		if r := e.tunRefuses(o); r != "" {
			why += ", or " + r
		}
		return "", why
	}
	return "backend", fmt.Sprintf("QEMU did not offer it although nothing netctl read forbids it; the backend (%s) cannot carry it", e.backendName)
}

func featureFamily(f virtio.Features) string {
	switch f {
	case virtio.NetGuestUSO4, virtio.NetGuestUSO6, virtio.NetHostUSO:
		return "USO"
	}
	return virtio.BitName(f.Bits()[0])
}

// notAcked explains why the guest did not take an offered bit.
func (e *explainer) notAcked(f, needs virtio.Features) string {
	if !e.negotiated {
		return fmt.Sprintf("the guest has not negotiated features yet (device status: %s): is the guest's virtio-net driver loaded?", orDash(strings.Join(e.statusNames(), "|")))
	}
	if needs != 0 && e.guest&needs == 0 {
		return fmt.Sprintf("it needs %s, which the guest did not acknowledge", strings.Join(needs.Names(), " or "))
	}
	switch f {
	case virtio.NetGuestUSO4, virtio.NetGuestUSO6, virtio.NetHostUSO:
		return "the guest's driver did not take it (Linux guests take USO from 6.2)"
	case virtio.NetGSO:
		return "a legacy bit modern drivers do not take"
	case virtio.Bit(30):
		return "VIRTIO_F_BAD_FEATURE: virtio-pci offers it to catch broken legacy drivers (QEMU prints it as VHOST_USER_F_PROTOCOL_FEATURES); guests never take it"
	case virtio.AnyLayout, virtio.NotifyOnEmpty:
		return "a legacy transport bit; modern (VERSION_1) drivers do not take it"
	}
	return "the guest's driver did not take it: it does not know it, or it was turned off in the guest"
}

func (e *explainer) statusNames() []string { return e.q.statuses() }

// honoured says whether the backend carries an acknowledged offload:
// "yes", "no", or "?" when nothing could be checked.
func (e *explainer) honoured(o policy.Offload) (string, string) {
	s := e.s
	switch {
	case s.VDPA != nil:
		if !s.VDPA.HasNegotiated {
			return "?", "acknowledged; the vdpa device's negotiated features were not readable"
		}
		if e.backend.Has(o.F) {
			return "yes", "negotiated with the vdpa device " + s.VDPA.Device
		}
		return "no", "the guest acknowledged it but the vdpa device " + s.VDPA.Device + " did not negotiate it"
	case s.Tap != nil:
		if !o.RX {
			if o.F == virtio.NetHostUFO {
				return "yes", "the tap takes the guest's UFO frames (Linux guests have sent none since 4.14)"
			}
			return "yes", "the tap takes the guest's frames with their virtio-net header"
		}
		if s.Tap.OffloadsUnknown {
			return "?", "acknowledged; a macvtap does not show the offloads QEMU set on it, so netctl cannot check them"
		}
		ok, missing := e.tapHas(o.Tap)
		if ok && o.F == virtio.NetGuestUFO {
			return "yes", "tun takes TUN_F_UFO, but Linux has made no UFO frames since 4.14, so nothing changes"
		}
		if ok {
			return "yes", "the tap's " + strings.Join(without(o.Tap, "csum"), ",") + " offload is on"
		}
		why := fmt.Sprintf("the guest acknowledged it but the tap's %s offload is off: ", missing)
		if (o.F == virtio.NetGuestUSO4 || o.F == virtio.NetGuestUSO6) && e.guest&(virtio.NetGuestUSO4|virtio.NetGuestUSO6) != virtio.NetGuestUSO4|virtio.NetGuestUSO6 {
			return "no", why + "tun takes USO only as the pair USO4+USO6 and the guest acknowledged one, so QEMU sets neither"
		}
		var causes []string
		if e.guest.Has(virtio.NetCtrlGuestOffloads) {
			causes = append(causes, "the guest turned it off over the control queue (XDP, or ethtool -K in the guest)")
		}
		causes = append(causes, "someone ran ethtool -K "+s.Tap.Name+" on the host", "QEMU did not set it (TUNSETOFFLOAD)")
		return "no", why + strings.Join(causes, ", or ")
	}
	if e.hasVhostOffer && (s.Netdev.Type == "" || s.Netdev.Type == "tap") {
		if !o.RX {
			return "?", "acknowledged; vhost-net hands the guest's frames to the tap with their virtio-net header (the tap was not read)"
		}
		return "?", "acknowledged; vhost-net carries it only if the tap's " + strings.Join(without(o.Tap, "csum"), ",") +
			" offload is on, and the tap was not read (with a saved reply, name it with --tap)"
	}
	if s.Netdev.Type == "" {
		return "?", "acknowledged; no backend state was read (with a saved reply, name the tap with --tap)"
	}
	return "?", "acknowledged; netctl reads no backend state for netdev type " + s.Netdev.Type
}

// without returns s less x, sorted (["uso4", "uso6"] for either USO bit),
// or [x] when nothing is left.
func without(s []string, x string) []string {
	var out []string
	for _, v := range s {
		if v != x {
			out = append(out, v)
		}
	}
	if out == nil {
		return []string{x}
	}
	slices.Sort(out)
	return out
}

// otherRow explains a ring, control or transport bit.
func (e *explainer) otherRow(f virtio.Features) Row {
	b := f.Bits()[0]
	row := Row{Feature: virtio.BitName(b), Bit: b, Offered: e.host.Has(f), Acked: e.guest.Has(f), Backend: "-", Lower: "-"}
	if b == 30 {
		row.Feature = "BAD_FEATURE"
	}
	if e.s.VDPA != nil && e.s.VDPA.MgmtFeatures != 0 {
		row.Lower = yesNo(virtio.Features(e.s.VDPA.MgmtFeatures).Has(f))
	}
	switch {
	case !row.Offered && row.Acked:
		row.Verdict, row.Reason = "on", "acknowledged although QEMU does not list it as offered"
	case !row.Offered:
		row.Verdict = "off"
		row.Layer, row.Reason = e.ringNotOffered(f)
	case !row.Acked:
		row.Verdict, row.Layer, row.Reason = "off", "guest", e.notAcked(f, 0)
	default:
		row.Verdict, row.Reason = "on", "negotiated"
		if e.hasVhostOffer && vhostKernelBits.Has(f) {
			// QEMU acknowledges to vhost-net the guest's bits that it may
			// veto (vhost-dev acked-features); an empty word was not read.
			row.Backend = "yes"
			if e.vhostAcked != 0 && !e.vhostAcked.Has(f) {
				row.Backend, row.Reason = "no", "negotiated with the guest, but QEMU did not acknowledge it to vhost-net (vhost-dev acked-features)"
			}
		}
		if e.hasBackendWord && e.backendMask.Has(f) {
			row.Backend = yesNo(e.backend.Has(f))
			if !e.backend.Has(f) {
				row.Verdict, row.Layer, row.Reason = "off", "backend", "the guest acknowledged it but the backend ("+e.backendName+") did not take it"
			}
		}
	}
	return row
}
