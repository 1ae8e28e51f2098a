package exporter

import (
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netctl/netctl/stats"
)

// The metrics. Names follow Prometheus's conventions (base units,
// counters end in _total) and node_exporter's node_network_* for the
// link. Every per-NIC metric has the labels vm (QEMU's -name, else the
// VM's UUID, else the QMP socket), nic (the device id in QEMU) and backend
// (vhost-net, vdpa, userspace; "" for a NIC netctl did not attach).
// Directions are the guest's: "receive" and rx are what the guest
// received: a tap's transmit counter, a macvtap's receive counter
// (package stats measured both and turns them the guest's way).
var nicLabels = []string{"vm", "nic", "backend"}

func withNIC(extra ...string) []string { return append(append([]string(nil), nicLabels...), extra...) }

// metricLabels are each metric's name and labels, as newDesc made them.
var metricLabels = map[string][]string{}

// newDesc is prometheus.NewDesc (no constant labels) that also records
// the name and labels for MetricLabels.
func newDesc(name, help string, labels []string, _ prometheus.Labels) *prometheus.Desc {
	metricLabels[name] = append([]string(nil), labels...)
	return prometheus.NewDesc(name, help, labels, nil)
}

// MetricLabels are every metric the exporter can serve, by name, with
// its labels (a copy): what a dashboard or an alerting rule may ask for
// (deploy/monitoring checks its queries against it).
func MetricLabels() map[string][]string {
	m := make(map[string][]string, len(metricLabels))
	for name, l := range metricLabels {
		m[name] = append([]string(nil), l...)
	}
	return m
}

var (
	descNICUp = newDesc("netctl_nic_up",
		"1 if the NIC's VM answered this scrape and the NIC is there, 0 if it is gone (VM exited, NIC detached) or no source answered.",
		nicLabels, nil)
	descNICInfo = newDesc("netctl_nic_info",
		"The NIC's host side: its link (tap or macvtap), QEMU netdev, QMP socket, vdpa device and libvirt domain (its UUID, for a NIC read through libvirt), and the VM's UUID (QEMU's query-uuid; \"\" when QEMU has none): the ring counters are the VM's, carried across QEMU processes of the same UUID; always 1.",
		withNIC("link", "netdev", "qmp", "vdpa", "libvirt_domain", "uuid"), nil)
	descLibvirtTainted = newDesc("netctl_nic_libvirt_tainted",
		"1 if this scrape asked QEMU through libvirt's monitor passthrough for the NIC (--qemu-monitor), after which libvirt marks the domain \"tainted: custom-monitor\"; 0 if it read only what libvirt reports. Only for NICs of libvirt domains.",
		nicLabels, nil)
	descQueuePairs = newDesc("netctl_nic_queue_pairs",
		"Queue pairs of the NIC.", nicLabels, nil)
	descSourceUp = newDesc("netctl_source_up",
		"1 if the source (link, rings, vhost, vdpa, qmp) gave figures for the NIC in this scrape, 0 if not; netctl_source_missing_info says why.",
		withNIC("source"), nil)
	descSourceMissing = newDesc("netctl_source_missing_info",
		"Why a source gave nothing for the NIC in this scrape, as a code (vm_gone, nic_gone, monitor_busy, no_monitor, not_started, unconfirmed, not_supported, no_link, permission, timeout, error; netctl stats says it in words); always 1.",
		withNIC("source", "reason"), nil)

	descQueueOffered = newDesc("netctl_queue_offered_descriptors_total",
		"Descriptor chains the guest made available on a queue's ring (avail-ring entries), since netctl first read the ring. direction is the guest's (rx: the guest's receive queue). "+ringContinuity,
		withNIC("queue", "direction"), nil)
	descQueueCompleted = newDesc("netctl_queue_completed_descriptors_total",
		"Descriptor chains the device returned on a queue's ring (used-ring entries: for tx one per packet, for rx one per buffer), since netctl first read the ring. direction is the guest's. "+ringContinuity,
		withNIC("queue", "direction"), nil)
	descQueueUncounted = newDesc("netctl_queue_uncounted_steps_total",
		"Steps of a queue's ring indices netctl did not count because they could not be told from the indices going back (more than half of the 16-bit range between two reads: a loadvm or snapshot revert, a reset not seen): each may hide up to 32768 descriptors.",
		withNIC("queue", "direction"), nil)
	descWorkerCPU = newDesc("netctl_vhost_worker_cpu_seconds_total",
		"CPU time of the vhost-net worker thread of a queue pair (one per /dev/vhost-net fd): the thread's own, so a new thread (a migration's destination, a re-attach) starts again at 0, a counter reset.",
		withNIC("queue"), nil)
	descVDPAReceived = newDesc("netctl_vdpa_queue_received_descriptors_total",
		"vdpa vstats received_desc of a virtqueue (the parent driver's own counter; only some drivers, e.g. mlx5_vdpa, have it).",
		withNIC("queue", "type"), nil)
	descVDPACompleted = newDesc("netctl_vdpa_queue_completed_descriptors_total",
		"vdpa vstats completed_desc of a virtqueue (the parent driver's own counter; only some drivers, e.g. mlx5_vdpa, have it).",
		withNIC("queue", "type"), nil)

	descTargetUp = newDesc("netctl_target_up",
		"1 if the target the exporter was given (--vm NAME, --qmp SOCKET, --domain DOMAIN, or the state directory) could be listed in this scrape, 0 if not (netctl_target_error_info says why).",
		[]string{"target"}, nil)
	descTargetError = newDesc("netctl_target_error_info",
		"Why a target could not be listed in this scrape, as a code (as netctl_source_missing_info's); always 1.",
		[]string{"target", "reason"}, nil)
	descScrapeSeconds = newDesc("netctl_scrape_duration_seconds",
		"How long this scrape took to list and sample every NIC.", nil, nil)
	descScrapeNICs = newDesc("netctl_scrape_nics",
		"NICs in this scrape, including those gone since an earlier one.", nil, nil)
)

// ringContinuity is what the ring counters' HELP says of a VM's NIC
// moving to another QEMU process (package stats, continuity.go).
const ringContinuity = "They are the VM's (by its UUID, netctl_nic_info's uuid): a QEMU on this host that takes the NIC over goes on with them, from the indices the guest carried over when it came by migration (-incoming), and counting its new rings on top when it booted the guest itself (as for a device reset); without a UUID a new QEMU process starts again at 0."

// linkDirs are node_exporter's four per-direction link counters.
var linkDescs = func() (m [2][4]*prometheus.Desc) {
	for d, dir := range []string{"receive", "transmit"} {
		for i, c := range []struct{ name, help string }{
			{"bytes", "Bytes"}, {"packets", "Packets"}, {"errs", "Errors"}, {"drop", "Dropped packets"},
		} {
			m[d][i] = newDesc("netctl_link_"+dir+"_"+c.name+"_total",
				c.help+" the guest "+map[string]string{"receive": "received (a tap's transmit counter, a macvtap's receive counter)", "transmit": "sent (a tap's receive counter, a macvtap's transmit counter)"}[dir]+
					"; per NIC: tun and macvtap have no per-queue counters. The link's own counters, as node_exporter's: a link made anew (a migration's destination, a re-attach) starts again at 0, a counter reset.",
				withNIC("device"), nil)
		}
	}
	return m
}()

// allDescs are every metric the exporter can give.
func allDescs() []*prometheus.Desc {
	d := []*prometheus.Desc{descNICUp, descNICInfo, descLibvirtTainted, descQueuePairs, descSourceUp, descSourceMissing, descQueueOffered, descQueueCompleted, descQueueUncounted, descWorkerCPU,
		descVDPAReceived, descVDPACompleted, descTargetUp, descTargetError, descScrapeSeconds, descScrapeNICs}
	for _, dir := range linkDescs {
		d = append(d, dir[:]...)
	}
	return d
}

// Sources are the values of the source label.
var Sources = []string{stats.SourceLink, stats.SourceRings, stats.SourceVhost, stats.SourceVDPA, stats.SourceQMP}

// ReasonCodes are the values of the reason label: what a reason (free
// text from package stats, QEMU, netlink, /proc) is about. A label whose
// value carried the text would make a new series each time a number in
// it changed (a pid, an index, a time).
var ReasonCodes = []string{"vm_gone", "nic_gone", "monitor_busy", "no_monitor", "not_started", "unconfirmed",
	"not_supported", "no_link", "permission", "timeout", "error"}

// reasonMatch maps words of a reason to its code, first match wins.
var reasonMatch = []struct {
	code  string
	words []string
}{
	{"monitor_busy", []string{"monitor busy", "busy: held by", "held by pid", "in use by pid"}},
	{"vm_gone", []string{"VM gone", "has exited", "no VM named", "no longer runs"}},
	{"nic_gone", []string{"NIC gone", "is gone", "detached"}},
	// A libvirt domain's rings and QMP without --qemu-monitor
	// (stats.NoMonitorWhy, stats.NoMonitorQMPWhy): libvirt holds the monitor.
	{"no_monitor", []string{"no QMP monitor", "no QMP to find", "go through libvirt", "no usable monitor", "without --qemu-monitor"}},
	{"not_supported", []string{"not provided by this driver", "needs QEMU", "packed ring", "CONFIG_CROSS_MEMORY_ATTACH", "not supported"}},
	{"not_started", []string{"has not started", "has set up none", "vhost is stopped", "no owner yet", "no data queues"}},
	{"unconfirmed", []string{"not counted until", "the ring moved", "was reset since", "not a split ring", "cannot tell which", "attributes them in attach order"}},
	{"no_link", []string{"no host link", "has no host link"}},
	{"permission", []string{"run netctl as root", "permission denied", "operation not permitted"}},
	{"timeout", []string{"deadline", "timed out", "timeout"}},
}

// reasonLabel is the code of a reason (ReasonCodes; "error" when none
// matches).
func reasonLabel(why string) string {
	l := strings.ToLower(why)
	for _, m := range reasonMatch {
		for _, w := range m.words {
			if strings.Contains(l, strings.ToLower(w)) {
				return m.code
			}
		}
	}
	return "error"
}

// labelValue makes s a valid label value: label values come from
// outside (QEMU's -name, a tap name from QEMU's fdinfo, a monitor
// holder's comm, QEMU's error text), and client_golang refuses bytes
// that are not UTF-8 (MustNewConstMetric panics): each such byte
// becomes U+FFFD.
func labelValue(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// constMetric is prometheus.MustNewConstMetric with every label value
// made valid (labelValue); it panics only on a wrong number of labels,
// which is this package's own error.
func constMetric(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) prometheus.Metric {
	for i := range labels {
		labels[i] = labelValue(labels[i])
	}
	return prometheus.MustNewConstMetric(d, t, v, labels...)
}

// nicMetrics are one NIC's metrics in a scrape. up is the decision of
// nicUp; labels are vm, nic, backend.
func nicMetrics(s stats.NICStats, up bool, labels []string, emit func(prometheus.Metric)) {
	gauge := func(d *prometheus.Desc, v float64, extra ...string) {
		emit(constMetric(d, prometheus.GaugeValue, v, append(append([]string(nil), labels...), extra...)...))
	}
	counter := func(d *prometheus.Desc, v float64, extra ...string) {
		emit(constMetric(d, prometheus.CounterValue, v, append(append([]string(nil), labels...), extra...)...))
	}
	t := s.Target
	gauge(descNICUp, b2f(up))
	domain := ""
	if t.Libvirt != nil {
		domain = t.Libvirt.UUID
		gauge(descLibvirtTainted, b2f(s.Tainted))
	}
	gauge(descNICInfo, 1, t.Link, t.Netdev, t.QMP, t.VDPA, domain, t.UUID)
	if t.QueuePairs > 0 {
		gauge(descQueuePairs, float64(t.QueuePairs))
	}
	sources := map[string]bool{}
	if l := s.Link; l != nil {
		sources[stats.SourceLink] = true
		for d, c := range []stats.Counters{l.RX, l.TX} {
			for i, v := range []uint64{c.Bytes, c.Packets, c.Errors, c.Drops} {
				counter(linkDescs[d][i], float64(v), t.Link)
			}
		}
	}
	if len(s.Queues) > 0 {
		sources[stats.SourceRings] = true
	}
	seenQ := map[[2]string]bool{}
	for _, q := range s.Queues {
		k := [2]string{strconv.Itoa(q.Pair), q.Direction}
		if seenQ[k] { // a source that repeats a queue must not break the whole scrape
			continue
		}
		seenQ[k] = true
		counter(descQueueOffered, float64(q.Offered), k[0], k[1])
		counter(descQueueCompleted, float64(q.Completed), k[0], k[1])
		counter(descQueueUncounted, float64(q.Uncounted), k[0], k[1])
	}
	if len(s.Workers) > 0 {
		sources[stats.SourceVhost] = true
	}
	seenW := map[int]bool{}
	for _, w := range s.Workers {
		if seenW[w.Pair] {
			continue
		}
		seenW[w.Pair] = true
		counter(descWorkerCPU, w.CPUSeconds, strconv.Itoa(w.Pair))
	}
	if len(s.VDPA) > 0 {
		sources[stats.SourceVDPA] = true
	}
	seenV := map[int]bool{}
	for _, v := range s.VDPA {
		if seenV[v.Queue] {
			continue
		}
		seenV[v.Queue] = true
		counter(descVDPAReceived, float64(v.ReceivedDesc), strconv.Itoa(v.Queue), v.Type)
		counter(descVDPACompleted, float64(v.CompletedDesc), strconv.Itoa(v.Queue), v.Type)
	}
	if _, busy := s.Missing[stats.SourceQMP]; t.QMP != "" && !busy && up {
		sources[stats.SourceQMP] = true
	}
	for src, why := range s.Missing {
		if sources[src] || !slices.Contains(Sources, src) {
			continue // figures and a note both: the figures count; only the documented sources
		}
		sources[src] = false
		gauge(descSourceMissing, 1, src, reasonLabel(why))
	}
	for src, ok := range sources {
		gauge(descSourceUp, b2f(ok), src)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
