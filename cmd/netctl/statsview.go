package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/netctl/netctl/stats"
)

// What netctl stats prints: one sample (statsSample) per interval, as a
// table for people (writeStatsTable, at most 80 columns) or as one JSON
// object per line (writeStatsJSON). Both are pure: they format a sample
// the command built from two stats.NICStats one interval apart.
//
// Directions are the guest's: rx is what the guest received (a tap's
// transmit, a macvtap's receive: package stats turns each the guest's
// way), tx what it sent. Every rate is per second over
// the sample's interval. A nil rate is "no source for it" (the NIC's
// missing map says why), never zero.

// statsSample is one interval of netctl stats. Its JSON is the schema of
// netctl stats --json (one object per line); the field names are stable.
type statsSample struct {
	Time            time.Time  `json:"time"`             // when the second sample was taken (RFC 3339, UTC)
	IntervalSeconds float64    `json:"interval_seconds"` // seconds between the two samples
	Directions      string     `json:"directions"`       // always "guest": rx = received by the guest
	NICs            []nicRates `json:"nics"`
	// ListError: listing the NICs failed this interval (the VM no longer
	// runs, its monitor is busy); the NICs seen before are then gone.
	ListError string `json:"list_error,omitempty"`
}

// nicRates is one NIC's rates.
type nicRates struct {
	VM      string `json:"vm"`                // QEMU's -name, or "" when only the socket is known
	NIC     string `json:"nic"`               // the device id in QEMU
	QMP     string `json:"qmp,omitempty"`     // the VM's QMP socket
	Backend string `json:"backend,omitempty"` // vhost-net, vdpa, userspace, or "" (not netctl's: unknown)
	Link    string `json:"link,omitempty"`    // the host link (tap or macvtap), if any
	// State: "up" (sampled), "gone" (detached or its VM exited since the
	// watch started) or "error" (no source answered; see missing).
	State  string       `json:"state"`
	RX     *dirRates    `json:"rx"` // the guest's receive side (the link's transmit); null: no link counters
	TX     *dirRates    `json:"tx"` // the guest's transmit side (the link's receive)
	Queues []queueRates `json:"queues"`
	VDPA   []vdpaRates  `json:"vdpa,omitempty"`
	// Missing: source ("link", "queues", "workers", "vdpa", ...) -> why
	// it gave nothing this interval.
	Missing map[string]string `json:"missing,omitempty"`
	// Libvirt: the NIC is a libvirt domain's, read through libvirt's API
	// (the domain's UUID).
	Libvirt string `json:"libvirt_domain,omitempty"`
	// LinkFrom: "libvirt" when rx and tx are libvirt's interface counters
	// (virDomainInterfaceStats), the tap not being on this host.
	LinkFrom string `json:"link_from,omitempty"`
	// Tainted: "custom-monitor" when --qemu-monitor asked QEMU through
	// libvirt's monitor passthrough: libvirt has marked the domain
	// "tainted: custom-monitor".
	Tainted string `json:"tainted,omitempty"`
}

// dirRates are one direction's link counters per second (whole NIC:
// tun and macvtap count per device, not per queue).
type dirRates struct {
	Packets float64 `json:"packets_per_second"`
	Bytes   float64 `json:"bytes_per_second"`
	Errors  float64 `json:"errors_per_second"`
	Drops   float64 `json:"drops_per_second"`
}

// queueRates is one queue pair's rates.
type queueRates struct {
	Queue int `json:"queue"` // the queue pair, 0-based
	// Descriptors the guest's rx (tx) ring completed per second: used-ring
	// entries the device returned. nil: no ring source.
	RXDescriptors *float64 `json:"rx_descriptors_per_second"`
	TXDescriptors *float64 `json:"tx_descriptors_per_second"`
	// Offered: avail-ring entries the guest posted per second.
	RXOffered *float64 `json:"rx_offered_per_second"`
	TXOffered *float64 `json:"tx_offered_per_second"`
	// VhostCPUPercent: the pair's vhost worker's CPU time per second, in
	// percent of one CPU. nil: no vhost worker (userspace, vdpa) or none found.
	VhostCPUPercent *float64 `json:"vhost_cpu_percent"`
}

// vdpaRates is one vdpa virtqueue's vstats per second.
type vdpaRates struct {
	Queue     int     `json:"queue"`
	Type      string  `json:"type"` // rx, tx, control_vq
	Received  float64 `json:"received_descriptors_per_second"`
	Completed float64 `json:"completed_descriptors_per_second"`
}

const (
	stateUp    = "up"
	stateGone  = "gone"
	stateError = "error"
)

// writeStatsJSON writes s as one line of JSON.
func writeStatsJSON(w io.Writer, s statsSample) error {
	s.Directions = "guest"
	for i := range s.NICs {
		if s.NICs[i].Queues == nil {
			s.NICs[i].Queues = []queueRates{}
		}
	}
	if s.NICs == nil {
		s.NICs = []nicRates{}
	}
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// tableWidth is the widest line writeStatsTable writes (notes are
// wrapped to it).
const tableWidth = 80

// The table's columns: the NIC, the queue pair, then six rates and the
// vhost worker's CPU. 15+1+3 + 6*(1+7) + 1+6 = 74 columns.
const (
	nicCol  = 15
	qCol    = 3
	rateCol = 7
	cpuCol  = 6
)

// writeStatsTable writes s as a table: a header that says what the
// numbers are, one row per NIC (its link's totals with the sums of its
// queues) and, for a NIC with more than one queue pair, one row per pair,
// then notes: the sources that gave nothing and why, errors and drops.
func writeStatsTable(w io.Writer, s statsSample) error {
	s = termSafeSample(s)
	var b strings.Builder
	interval := time.Duration(s.IntervalSeconds * float64(time.Second)).Round(time.Millisecond)
	head := fmt.Sprintf("%s: %d NIC(s), per second over %s. rx/tx are the guest's: rx is what the guest received (a tap's tx).",
		s.Time.UTC().Format("15:04:05"), len(s.NICs), interval)
	for _, l := range wrap(head, tableWidth) {
		b.WriteString(l + "\n")
	}
	fmt.Fprintf(&b, "%-*s %*s %*s %*s %*s %*s %*s %*s %*s\n", nicCol, "VM/NIC", qCol, "Q",
		rateCol, "rx pk/s", rateCol, "rx B/s", rateCol, "tx pk/s", rateCol, "tx B/s",
		rateCol, "rx dsc", rateCol, "tx dsc", cpuCol, "vhost")
	var notes []string
	if s.ListError != "" {
		notes = append(notes, "listing the NICs: "+s.ListError)
	}
	perQueue := false
	for _, n := range s.NICs {
		name := clipNIC(nicName(n), nicCol)
		switch n.State {
		case stateGone:
			fmt.Fprintf(&b, "%-*s %s\n", nicCol, name, "gone: detached, or its VM exited")
			continue
		case stateError:
			fmt.Fprintf(&b, "%-*s %s\n", nicCol, name, "no source answered (see below)")
		}
		if n.State != stateError {
			q := "all"
			if len(n.Queues) == 1 {
				q = strconv.Itoa(n.Queues[0].Queue)
			}
			rxd, txd, cpu := sumQueues(n.Queues)
			b.WriteString(row(name, q, n.RX, n.TX, rxd, txd, cpu))
			if len(n.Queues) > 1 {
				for _, qr := range n.Queues {
					b.WriteString(row("", strconv.Itoa(qr.Queue), nil, nil, qr.RXDescriptors, qr.TXDescriptors, qr.VhostCPUPercent))
				}
				perQueue = true
			}
		}
		if n.Tainted != "" {
			notes = append(notes, fmt.Sprintf("%s: --qemu-monitor asked QEMU through libvirt (virDomainQemuMonitorCommand): libvirt has marked domain %s \"tainted: %s\"", nicName(n), n.VM, n.Tainted))
		}
		if n.LinkFrom == "libvirt" {
			notes = append(notes, fmt.Sprintf("%s: rx and tx are libvirt's interface counters (virDomainInterfaceStats): the tap is not on this host", nicName(n)))
		}
		for _, src := range sortedKeys(n.Missing) {
			notes = append(notes, fmt.Sprintf("%s: no %s: %s", nicName(n), src, n.Missing[src]))
		}
		for _, d := range []struct {
			name string
			r    *dirRates
		}{{"rx", n.RX}, {"tx", n.TX}} {
			if d.r != nil && (d.r.Errors > 0 || d.r.Drops > 0) {
				notes = append(notes, fmt.Sprintf("%s: %s errors %s/s, drops %s/s", nicName(n), d.name, human(d.r.Errors), human(d.r.Drops)))
			}
		}
	}
	if perQueue {
		notes = append(notes, "per queue: packets and bytes have no source (tun and macvtap count per device, not per queue); 'all' is the link's")
	}
	if len(s.NICs) > 0 {
		notes = append(notes, "dsc: ring descriptors completed; vhost: the queue pair's vhost worker, % of one CPU; -: no source")
	}
	for _, n := range notes {
		for i, l := range wrap(n, tableWidth-2) {
			if i == 0 {
				b.WriteString("  " + l + "\n")
			} else {
				b.WriteString("    " + l + "\n")
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func row(name, q string, rx, tx *dirRates, rxd, txd, cpu *float64) string {
	cell := func(r *dirRates, bytes bool) string {
		if r == nil {
			return "-"
		}
		if bytes {
			return human(r.Bytes)
		}
		return human(r.Packets)
	}
	opt := func(v *float64) string {
		if v == nil {
			return "-"
		}
		return human(*v)
	}
	c := "-"
	if cpu != nil {
		c = strconv.FormatFloat(math.Min(*cpu, 9999), 'f', 1, 64) + "%"
		if *cpu >= 100 {
			c = strconv.FormatFloat(math.Min(*cpu, 99999), 'f', 0, 64) + "%"
		}
	}
	return fmt.Sprintf("%-*s %*s %*s %*s %*s %*s %*s %*s %*s\n", nicCol, name, qCol, q,
		rateCol, cell(rx, false), rateCol, cell(rx, true), rateCol, cell(tx, false), rateCol, cell(tx, true),
		rateCol, opt(rxd), rateCol, opt(txd), cpuCol, clip(c, cpuCol))
}

// sumQueues adds up the queues' rates; a sum is nil when no queue has
// the figure.
func sumQueues(qs []queueRates) (rx, tx, cpu *float64) {
	add := func(acc **float64, v *float64) {
		if v == nil {
			return
		}
		if *acc == nil {
			*acc = new(float64)
		}
		**acc += *v
	}
	for _, q := range qs {
		add(&rx, q.RXDescriptors)
		add(&tx, q.TXDescriptors)
		add(&cpu, q.VhostCPUPercent)
	}
	return rx, tx, cpu
}

func nicName(n nicRates) string {
	vm := n.VM
	if vm == "" {
		vm = n.QMP
		if i := strings.LastIndexByte(vm, '/'); i >= 0 {
			vm = vm[i+1:]
		}
	}
	return vm + "/" + n.NIC
}

// human formats a rate in at most 7 characters with an SI prefix: 0,
// 12.5, 999, 1.23k, 45.6M, 1.20G.
func human(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "?"
	case v < 0:
		return "-" + human(-v)
	case v == 0:
		return "0"
	case v < 10:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case v < 1000:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	for _, p := range []string{"k", "M", "G", "T", "P", "E"} {
		v /= 1000
		if v < 999.5 {
			switch {
			case v < 9.995:
				return strconv.FormatFloat(v, 'f', 2, 64) + p
			case v < 99.95:
				return strconv.FormatFloat(v, 'f', 1, 64) + p
			}
			return strconv.FormatFloat(v, 'f', 0, 64) + p
		}
	}
	return "huge"
}

// clipNIC fits "VM/NIC" into n runes, shortening the VM's name first: the
// NIC id is what tells the rows of one VM apart.
func clipNIC(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	i := strings.LastIndexByte(s, '/')
	if i < 0 {
		return clip(s, n)
	}
	vm, nic := []rune(s[:i]), []rune(s[i:])
	if keep := n - len(nic) - 1; keep >= 2 && keep < len(vm) {
		return string(vm[:keep]) + "~" + string(nic)
	}
	return clip(s, n)
}

// clip shortens s to n runes, marking the cut with '~'.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "~"
}

// wrap breaks s into lines of at most width runes at spaces (a word
// longer than width is cut).
func wrap(s string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		for len([]rune(w)) > width {
			if line != "" {
				lines = append(lines, line)
				line = ""
			}
			r := []rune(w)
			lines = append(lines, string(r[:width]))
			w = string(r[width:])
		}
		switch {
		case line == "":
			line = w
		case len([]rune(line))+1+len([]rune(w)) <= width:
			line += " " + w
		default:
			lines = append(lines, line)
			line = w
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// nicView is one NIC's rates between two of its samples (prev earlier).
// A rate whose counter reset in the interval (stats.Rate's Reset) is nil:
// there is no honest figure for it.
func nicView(prev, cur stats.NICStats) nicRates {
	t := cur.Target
	n := nicRates{VM: t.VM, NIC: t.NIC, QMP: t.QMP, Backend: t.Backend, Link: t.Link, State: stateUp, LinkFrom: cur.LinkFrom}
	if t.Libvirt != nil {
		n.Libvirt = t.Libvirt.UUID
	}
	if cur.Tainted || prev.Tainted {
		n.Tainted = "custom-monitor"
	}
	if len(cur.Missing) > 0 {
		n.Missing = make(map[string]string, len(cur.Missing))
		for k, v := range cur.Missing {
			n.Missing[k] = v
		}
	}
	r := stats.Rate(prev, cur)
	if l := r.Link; l != nil {
		dir := func(d stats.DirRates) *dirRates {
			if d.Reset {
				return nil
			}
			return &dirRates{Packets: d.Packets, Bytes: d.Bytes, Errors: d.Errors, Drops: d.Drops}
		}
		n.RX, n.TX = dir(l.RX), dir(l.TX)
	}
	pairs := max(t.QueuePairs, 1)
	for _, q := range r.Queues {
		pairs = max(pairs, q.Pair+1)
	}
	for _, w := range r.Workers {
		pairs = max(pairs, w.Pair+1)
	}
	pairs = min(pairs, 1024) // bounded: the pair numbers come from outside
	n.Queues = make([]queueRates, pairs)
	for i := range n.Queues {
		n.Queues[i].Queue = i
	}
	for _, q := range r.Queues {
		if q.Pair < 0 || q.Pair >= pairs || q.Reset {
			continue
		}
		qr := &n.Queues[q.Pair]
		switch q.Direction {
		case "rx":
			qr.RXDescriptors, qr.RXOffered = fp64(q.Completed), fp64(q.Offered)
		case "tx":
			qr.TXDescriptors, qr.TXOffered = fp64(q.Completed), fp64(q.Offered)
		}
	}
	for _, w := range r.Workers {
		if w.Pair < 0 || w.Pair >= pairs || w.Reset {
			continue
		}
		qr := &n.Queues[w.Pair]
		if qr.VhostCPUPercent == nil {
			qr.VhostCPUPercent = new(float64)
		}
		*qr.VhostCPUPercent += w.CPUFraction * 100
	}
	for _, v := range r.VDPA {
		if !v.Reset {
			n.VDPA = append(n.VDPA, vdpaRates{Queue: v.Queue, Type: v.Type, Received: v.ReceivedDesc, Completed: v.CompletedDesc})
		}
	}
	if cur.Link == nil && len(cur.Queues) == 0 && len(cur.Workers) == 0 && len(cur.VDPA) == 0 {
		n.State = stateError
	}
	return n
}

func fp64(v float64) *float64 { return &v }

// termSafeSample is s with every name and reason termSafe (a copy: s's
// NICs and maps are left as they are).
func termSafeSample(s statsSample) statsSample {
	s.ListError = termSafe(s.ListError)
	nics := make([]nicRates, len(s.NICs))
	for i, n := range s.NICs {
		n.VM, n.NIC, n.QMP, n.Backend, n.Link = termSafe(n.VM), termSafe(n.NIC), termSafe(n.QMP), termSafe(n.Backend), termSafe(n.Link)
		if n.Missing != nil {
			m := make(map[string]string, len(n.Missing))
			for k, v := range n.Missing {
				m[termSafe(k)] = termSafe(v)
			}
			n.Missing = m
		}
		nics[i] = n
	}
	s.NICs = nics
	return s
}
