package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/vhostnet/selftest"
)

// TestSelftestRefusesBadFlags: out-of-range flags are refused before
// anything runs, with an error that wraps errs.ErrInvalid and names the
// valid range.
func TestSelftestRefusesBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--frames", "-5"}, "--frames -5: invalid argument: use 1 to 100000"},
		{[]string{"--frames", "0"}, "--frames 0: invalid argument: use 1 to 100000"},
		{[]string{"--frames", "100001"}, "use 1 to 100000"},
		{[]string{"--queues", "0"}, "--queues 0: invalid argument: use 1 to 256"},
		{[]string{"--queues", "-1"}, "use 1 to 256"},
		{[]string{"--queues", "257"}, "--queues 257: invalid argument: use 1 to 256"},
		{[]string{"--frame-size", "59"}, "use 60 to 2036"},
		{[]string{"--frame-size", "2037"}, "use 60 to 2036"},
		{[]string{"--timeout", "-1s"}, "use a positive duration"},
		{[]string{"extra"}, `takes no arguments, got "extra"`},
	} {
		app := newApp()
		var out bytes.Buffer
		app.Writer, app.ErrWriter = &out, &out
		err := app.Run(append([]string{"netctl", "selftest"}, c.args...))
		if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("selftest %v: %v, want ErrInvalid saying %q", c.args, err, c.want)
		}
		if out.Len() != 0 {
			t.Errorf("selftest %v printed %q before refusing", c.args, out.String())
		}
	}
}

// TestPrintSelftestShowsTheReport: every line of the report that comes
// from the kernel prints the report's own value (issue 10 §2: the
// acknowledged word, the header size and the tap's offloads used to be
// constants). The report here differs from what a run sets (12-byte
// header, csum tso4 tso6), so a constant would show.
func TestPrintSelftestShowsTheReport(t *testing.T) {
	r := &selftest.Report{
		Kernel: "6.1.0-57-amd64", Tap: "nctlst7",
		OfferedNames: []string{"MRG_RXBUF", "VERSION_1"}, OfferedHex: "0x100008000",
		AckedNames: []string{"VERSION_1"}, AckedHex: "0x100000000",
		AckedInEffect: []string{},
		HeaderSize:    10, TapFlags: []string{"TAP", "NO_PI"},
		TapOffloads: []string{"csum"}, TapFeatures: []string{"tx-checksum-ip-generic"},
		Queues:      []selftest.QueueStats{{Queue: 0, TXSent: 5, TXUsed: 5, TXPackets: 4, TXBytes: 400, RXPackets: 3, RXBytes: 300, Kicks: 2, Interrupts: 1}},
		GuestToHost: selftest.Direction{Planned: 5, Sent: 5, Received: 4, Lost: 1},
		HostToGuest: selftest.Direction{Planned: 5, Sent: 5, Received: 3, Lost: 1, Corrupted: 1},
	}
	var out bytes.Buffer
	printSelftest(&out, r)
	wantLines(t, out.String(),
		"vhost-net on Linux 6.1.0-57-amd64, 1 queue pair(s) over tap nctlst7",
		"vhost-net offers:   MRG_RXBUF|VERSION_1 (0x100008000, VHOST_GET_FEATURES)",
		"acknowledged:       VERSION_1 (0x100000000, accepted by VHOST_SET_FEATURES",
		"seen in effect:     none",
		"virtio-net header:  10 bytes (TUNGETVNETHDRSZ); tap flags TAP|NO_PI (TUNGETIFF)",
		"tap offloads:       csum (ethtool: tx-checksum-ip-generic)",
		"guest→host:  4 of 5 frames intact (1 lost, 0 corrupted, 0 duplicated)",
		"host→guest:  3 of 5 frames intact (1 lost, 1 corrupted, 0 duplicated)")
}

// wantLines fails t for each of want that the selftest output out lacks.
func wantLines(t *testing.T, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("selftest output lacks %q:\n%s", w, out)
		}
	}
}

// TestSelftestJSONFailureIsOneDocument: selftest -j on a run that failed
// (a report and an error) prints one JSON document, the report with
// "error" and "hint" in it, and no second error object after it; the
// message still goes to stderr, exit 1.
func TestSelftestJSONFailureIsOneDocument(t *testing.T) {
	rep := &selftest.Report{Kernel: "6.1.0-57-amd64", HostToGuest: selftest.Direction{Planned: 5, Sent: 5, Lost: 5}}
	runErr := errors.New("selftest: host to guest: 5 of 5 frames lost, 0 corrupted, 0 duplicated")
	app := &cli.App{Name: "netctl", ExitErrHandler: func(*cli.Context, error) {}, Commands: []*cli.Command{{
		Name:   "selftest",
		Flags:  []cli.Flag{&cli.BoolFlag{Name: "json", Aliases: []string{"j"}}},
		Action: func(c *cli.Context) error { return printSelftestJSON(c.App.Writer, rep, runErr) },
	}}}
	var stdout, stderr bytes.Buffer
	code := runApp(app, []string{"netctl", "selftest", "-j"}, &stdout, &stderr)
	dec := json.NewDecoder(&stdout)
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("stdout is not JSON: %v", err)
	}
	if dec.More() {
		t.Errorf("stdout holds more than one JSON document")
	}
	if code != 1 || stderr.String() != "netctl: "+runErr.Error()+"\n" || doc["error"] != runErr.Error() || doc["hint"] == nil ||
		doc["kernel"] != "6.1.0-57-amd64" || doc["host_to_guest"] == nil {
		t.Errorf("exit %d, stderr %q, document %v", code, stderr.String(), doc)
	}
}
