package main

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func fp(v float64) *float64 { return &v }

// sampleForView has every case the table must fit in 80 columns: a long
// VM name, a 4-queue NIC with huge rates, a NIC with missing sources and
// errors, a gone NIC and one whose sources all failed.
func sampleForView() statsSample {
	big := &dirRates{Packets: 123456789, Bytes: 9.87e12, Errors: 3, Drops: 1.5}
	var qs []queueRates
	for i := range 4 {
		qs = append(qs, queueRates{Queue: i, RXDescriptors: fp(1e6 * float64(i+1)), TXDescriptors: fp(0), RXOffered: fp(2e6), TXOffered: fp(0), VhostCPUPercent: fp(99.95)})
	}
	return statsSample{
		Time: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), IntervalSeconds: 1,
		ListError: `qemuproc: no VM named "db"; running: web1 (netctl vm list shows them)`,
		NICs: []nicRates{
			{VM: "a-very-long-vm-name-that-does-not-fit", NIC: "net1", Backend: "vhost-net", Link: "nctl0", State: stateUp, RX: big, TX: big, Queues: qs},
			{VM: "web1", NIC: "net2", Backend: "userspace", State: stateUp, RX: &dirRates{Packets: 10, Bytes: 1500},
				TX: &dirRates{Packets: 0.5, Bytes: 49}, Queues: []queueRates{{Queue: 0, RXDescriptors: fp(10), TXDescriptors: fp(0.5)}},
				Missing: map[string]string{"workers": "no vhost worker: QEMU moves this NIC's packets itself (userspace backend), so there is no per-queue CPU figure to read"}},
			{VM: "web1", NIC: "net3", State: stateGone},
			{QMP: "/run/vms/db.qmp", NIC: "net4", State: stateError, Missing: map[string]string{"link": "tap nctl9: no such link", "queues": "QMP monitor busy: another client holds /run/vms/db.qmp"}},
		},
	}
}

func TestStatsTable80Columns(t *testing.T) {
	var b bytes.Buffer
	if err := writeStatsTable(&b, sampleForView()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Logf("\n%s", out)
	for i, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if n := utf8.RuneCountInString(l); n > tableWidth {
			t.Errorf("line %d is %d columns wide (max %d): %q", i+1, n, tableWidth, l)
		}
	}
	for _, want := range []string{
		"rx/tx are the guest's", "a tap's tx", // the header names the directions
		"a-very-lo~/net1 all", // the VM name clipped, the NIC id kept, not spilling
		"123M", "9.87T", "1.00M", "4.00M", "100.0%", "400%",
		"web1/net2", "web1/net3       gone: detached, or its VM exited",
		"db.qmp/net4     no source answered",
		"web1/net2: no workers: no vhost worker", "db.qmp/net4: no link: tap nctl9",
		"rx errors 3.00/s, drops 1.50/s",
		"per queue: packets and bytes have no source",
		`listing the NICs: qemuproc: no VM named "db"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q", want)
		}
	}
	// The 4-queue NIC: an "all" row, then one row per pair with "-" for
	// the per-queue packets it has no source for.
	lines := strings.Split(out, "\n")
	i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "a-very-lo~/net1") })
	if i < 0 || !strings.Contains(lines[i], " all ") {
		t.Fatalf("no 'all' row for the 4-queue NIC")
	}
	for q := range 4 {
		f := strings.Fields(lines[i+1+q])
		if len(f) != 8 || f[0] != string(rune('0'+q)) || f[1] != "-" || f[7] != "100.0%" {
			t.Errorf("queue row %d = %q", q, lines[i+1+q])
		}
	}
	// The 1-queue NIC: one row, queue 0.
	j := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "web1/net2") })
	if f := strings.Fields(lines[j]); len(f) != 9 || f[1] != "0" || f[2] != "10.0" || f[3] != "1.50k" || f[8] != "-" {
		t.Errorf("1-queue row = %q (%q)", lines[j], f)
	}
}

func TestStatsTableEmpty(t *testing.T) {
	var b bytes.Buffer
	writeStatsTable(&b, statsSample{Time: time.Unix(0, 0), IntervalSeconds: 2})
	if !strings.Contains(b.String(), "0 NIC(s), per second over 2s") {
		t.Errorf("empty table:\n%s", b.String())
	}
}

func TestHuman(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 0.5: "0.50", 9.999: "10.00", 12.34: "12.3", 999.9: "999.9",
		1000: "1.00k", 9995: "10.0k", 99950: "100k", 999499: "999k", 999500: "1.00M", 1.2e9: "1.20G", -5: "-5.00",
		math.NaN(): "?", math.Inf(1): "?", 1e30: "huge"} {
		if got := human(v); got != want || len(got) > rateCol {
			t.Errorf("human(%g) = %q, want %q (at most %d chars)", v, got, want, rateCol)
		}
	}
}

// TestStatsJSONSchema holds netctl stats --json to its documented field
// names: a script depends on them.
func TestStatsJSONSchema(t *testing.T) {
	var b bytes.Buffer
	s := sampleForView()
	if err := writeStatsJSON(&b, s); err != nil {
		t.Fatal(err)
	}
	if err := writeStatsJSON(&b, statsSample{Time: s.Time, IntervalSeconds: 1}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 JSON lines, got %d:\n%s", len(lines), b.String())
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal([]byte(lines[0]), &top); err != nil {
		t.Fatal(err)
	}
	keys := func(m map[string]json.RawMessage) []string {
		var k []string
		for n := range m {
			k = append(k, n)
		}
		slices.Sort(k)
		return k
	}
	if got := keys(top); !slices.Equal(got, []string{"directions", "interval_seconds", "list_error", "nics", "time"}) {
		t.Errorf("top-level keys %v", got)
	}
	if string(top["directions"]) != `"guest"` {
		t.Errorf("directions = %s", top["directions"])
	}
	var nics []map[string]json.RawMessage
	json.Unmarshal(top["nics"], &nics)
	if got := keys(nics[0]); !slices.Equal(got, []string{"backend", "link", "nic", "queues", "rx", "state", "tx", "vm"}) {
		t.Errorf("nic keys %v", got)
	}
	if got := keys(nics[3]); !slices.Equal(got, []string{"missing", "nic", "qmp", "queues", "rx", "state", "tx", "vm"}) {
		t.Errorf("failed nic keys %v", got)
	}
	if string(nics[3]["rx"]) != "null" || string(nics[3]["queues"]) != "[]" || string(nics[2]["state"]) != `"gone"` {
		t.Errorf("gone/failed NICs: rx %s queues %s state %s", nics[3]["rx"], nics[3]["queues"], nics[2]["state"])
	}
	var rx map[string]json.RawMessage
	json.Unmarshal(nics[0]["rx"], &rx)
	if got := keys(rx); !slices.Equal(got, []string{"bytes_per_second", "drops_per_second", "errors_per_second", "packets_per_second"}) {
		t.Errorf("rx keys %v", got)
	}
	var qs []map[string]json.RawMessage
	json.Unmarshal(nics[1]["queues"], &qs)
	if got := keys(qs[0]); !slices.Equal(got, []string{"queue", "rx_descriptors_per_second", "rx_offered_per_second", "tx_descriptors_per_second", "tx_offered_per_second", "vhost_cpu_percent"}) {
		t.Errorf("queue keys %v", got)
	}
	if string(qs[0]["vhost_cpu_percent"]) != "null" {
		t.Errorf("userspace NIC's vhost_cpu_percent = %s, want null", qs[0]["vhost_cpu_percent"])
	}
	var empty statsSample
	if err := json.Unmarshal([]byte(lines[1]), &empty); err != nil || empty.NICs == nil || len(empty.NICs) != 0 {
		t.Errorf("no NICs: %s (%v)", lines[1], err)
	}
}

func TestWrap(t *testing.T) {
	got := wrap("aaa bbb cccccccccc d", 5)
	if want := []string{"aaa", "bbb", "ccccc", "ccccc", "d"}; !slices.Equal(got, want) {
		t.Errorf("wrap = %q, want %q", got, want)
	}
}

// TestStatsTableTerminalSafe: names and reasons come from outside (a
// QEMU's -name and error text, an unprivileged user's fake monitor, a
// monitor holder's comm, a tap name): control characters (an escape
// sequence that retitles or clears the operator's terminal), bidi
// overrides and bytes that are not UTF-8 are shown escaped, never
// written to the terminal as they are, and the table stays 80 columns.
func TestStatsTableTerminalSafe(t *testing.T) {
	s := sampleForView()
	s.ListError = "qemuproc: \x1b]0;owned\x07 busy"
	s.NICs[1].VM = "web\x1b[2J1"
	s.NICs[1].Missing = map[string]string{"qmp": "monitor busy: held by pid 7 (ev\x1b[31mil\x9b)", "rings": "QEMU said \u202egnp.exe\xff"}
	s.NICs[2].NIC = "net\r3"
	var b bytes.Buffer
	if err := writeStatsTable(&b, s); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Logf("\n%s", out)
	for i, r := range []rune(out) {
		if (r < 0x20 && r != '\n') || (r >= 0x7f && r < 0xa0) || r == '\u202e' || r == utf8.RuneError {
			t.Errorf("rune %d is %U: written to the terminal as it is", i, r)
		}
	}
	for _, want := range []string{`\x1b]0;owned\x07`, `web\x1b[2J1`, `\x9b`, `\u202e`, `net\x0d3`} {
		if !strings.Contains(out, want) {
			t.Errorf("the table does not show %q", want)
		}
	}
	for i, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if n := utf8.RuneCountInString(l); n > tableWidth {
			t.Errorf("line %d is %d columns wide (max %d): %q", i+1, n, tableWidth, l)
		}
	}
}
