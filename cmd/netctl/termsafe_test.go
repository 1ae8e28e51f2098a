package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"
)

// evil is outside text that would take over a terminal: an OSC sequence
// that retitles it (ESC ] 0 ; ... BEL), a right-to-left override, a C1
// CSI and a byte that is not UTF-8.
const evil = "vm\x1b]0;pwned\x07\u202eevil\u009b2J\xff"

// evilShown is evil as a table shows it (termSafe), evilJSON as --json
// writes it inside a string.
const (
	evilShown = `vm\x1b]0;pwned\x07\u202eevil\u009b2J\xff`
	evilJSON  = `vm\u001b]0;pwned\u0007\u202eevil\u009b2J\ufffd`
)

// fakeQEMUMain is this test binary run as a fake QEMU (argv[0]
// qemu-system-x86_64, so qemuproc lists it): it serves QMP on its -qmp
// socket, greets, takes qmp_capabilities and answers every other command
// with an error whose text is evil. It returns when killed.
func fakeQEMUMain() int {
	var sock string
	for i, a := range os.Args {
		if a == "-qmp" && i+1 < len(os.Args) {
			sock, _, _ = strings.Cut(strings.TrimPrefix(os.Args[i+1], "unix:"), ",")
		}
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	desc, _ := json.Marshal("device not found: " + evil)
	for {
		c, err := ln.Accept()
		if err != nil {
			return 1
		}
		fmt.Fprintln(c, `{"QMP": {"version": {"qemu": {"micro": 0, "minor": 2, "major": 7}, "package": ""}, "capabilities": ["oob"]}}`)
		sc := bufio.NewScanner(c)
		for sc.Scan() {
			var req struct {
				Execute string          `json:"execute"`
				ID      json.RawMessage `json:"id"`
			}
			json.Unmarshal(sc.Bytes(), &req)
			id := ""
			if len(req.ID) > 0 {
				id = `, "id": ` + string(req.ID)
			}
			if req.Execute == "qmp_capabilities" {
				fmt.Fprintf(c, `{"return": {}%s}`+"\n", id)
				continue
			}
			fmt.Fprintf(c, `{"error": {"class": "GenericError", "desc": %s}%s}`+"\n", desc, id)
		}
		c.Close()
	}
}

// startFakeQEMU runs fakeQEMUMain as "qemu-system-x86_64 -name NAME -qmp
// unix:SOCK,server=on,wait=off" and returns its pid and socket once the
// socket is there.
func startFakeQEMU(t *testing.T, name string) (int, string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "qmp.sock")
	cmd := &exec.Cmd{Path: os.Args[0], Args: []string{"qemu-system-x86_64", "-name", name, "-qmp", "unix:" + sock + ",server=on,wait=off"},
		Env: append(os.Environ(), "NETCTL_TEST_FAKE_QEMU=1"), Stderr: os.Stderr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	// Up when it accepts a connection: the socket file appears at bind,
	// before listen (a loaded machine once ran the test in between).
	for end := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			return cmd.Process.Pid, sock
		}
		if time.Now().After(end) {
			t.Fatal("the fake QEMU never made its socket")
		}
	}
}

// TestCLIOutputTerminalSafe: a fake QEMU whose -name and error text carry
// an OSC retitle sequence, a bidi override, a C1 control and a byte that
// is not UTF-8. netctl vm list, its --json, and netctl diagnose's error
// line and --json error object are checked byte for byte: nothing of it
// reaches the terminal raw.
func TestCLIOutputTerminalSafe(t *testing.T) {
	pid, sock := startFakeQEMU(t, evil)
	run := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := runMain(append([]string{"netctl"}, args...), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}

	code, out, errOut := run("vm", "list", evil)
	var tbl bytes.Buffer
	tw := tabwriter.NewWriter(&tbl, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PID\tNAME\tMONITOR\tSTATE")
	fmt.Fprintf(tw, "%d\t%s\t%s\treachable\n", pid, evilShown, sock)
	tw.Flush()
	if code != 0 || out != tbl.String() || errOut != "" {
		t.Errorf("vm list: exit %d\nstdout %q\nwant   %q\nstderr %q", code, out, tbl.String(), errOut)
	}

	code, out, _ = run("vm", "list", "--json", evil)
	want := fmt.Sprintf(`{"pid":%d,"starttime":`, pid)
	if code != 0 || !strings.Contains(out, want) || !strings.Contains(out, `,"name":"`+evilJSON+`","binary":"qemu-system-x86_64",`) || !json.Valid([]byte(out)) {
		t.Errorf("vm list --json: exit %d, stdout %q, want it to hold %q", code, out, want)
	}

	code, out, errOut = run("diagnose", "--qmp", sock)
	// QEMU's JSON carries the byte that is not UTF-8 as U+FFFD already.
	wantErr := `netctl: diagnose: qmp: x-query-virtio: device not found: vm\x1b]0;pwned\x07\u202eevil\u009b2J` + "\ufffd (GenericError)\n"
	if code != 1 || out != "" || errOut != wantErr {
		t.Errorf("diagnose: exit %d\nstdout %q\nstderr %q\nwant   %q", code, out, errOut, wantErr)
	}
	code, out, errOut = run("diagnose", "--json", "--qmp", sock)
	wantJSON := `{"error":"diagnose: qmp: x-query-virtio: device not found: vm\u001b]0;pwned\u0007\u202eevil\u009b2J` + "\ufffd" + ` (GenericError)","hint":""}` + "\n"
	if code != 1 || out != wantJSON || errOut != wantErr {
		t.Errorf("diagnose --json: exit %d\nstdout %q\nwant   %q\nstderr %q", code, out, wantJSON, errOut)
	}
}

func TestEscapeOutput(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain text, tabs\tand\nnewlines\n", "plain text, tabs\tand\nnewlines\n"},
		{"héllo wörld ✓", "héllo wörld ✓"},
		{"\x1b]0;pwned\x07", `\x1b]0;pwned\x07`},
		{"a\rb\x7fc\x00", `a\x0db\u007fc\x00`},
		{"\u009b2J \u0085", `\u009b2J \u0085`},
		{"\u202egnp.exe \u2066x\u2069 \u200f", `\u202egnp.exe \u2066x\u2069 \u200f`},
		{"bad \xff\xfe end \xe2\x82", `bad \xff\xfe end \xe2\x82`},
		{"\ufffd is a character", "\ufffd is a character"},
	} {
		if got := string(escapeOutput([]byte(c.in))); got != c.want {
			t.Errorf("escapeOutput(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestSafeWriterJSON: JSON through the writer is still valid and holds
// the same strings, with C1 and bidi controls escaped.
func TestSafeWriterJSON(t *testing.T) {
	var b bytes.Buffer
	if err := printJSON(&safeWriter{w: &b}, map[string]string{"name": evil}); err != nil {
		t.Fatal(err)
	}
	if want := `{"name":"` + evilJSON + `"}` + "\n"; b.String() != want {
		t.Errorf("got  %q\nwant %q", b.String(), want)
	}
	var back map[string]string
	if err := json.Unmarshal(b.Bytes(), &back); err != nil || back["name"] != strings.ToValidUTF8(evil, "\ufffd") {
		t.Errorf("decoded %q (%v)", back["name"], err)
	}
}

// FuzzEscapeOutput: whatever the input, the output holds no control
// character but newline and tab, no C1 or bidi control and no byte that
// is not UTF-8; JSON stays JSON with the same value.
func FuzzEscapeOutput(f *testing.F) {
	for _, s := range []string{evil, "plain\n", "\u202e", "\xff", `{"a":"\u001b"}`, "\u2028"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out := escapeOutput(in)
		if !utf8.Valid(out) {
			t.Fatalf("%q: output %q is not UTF-8", in, out)
		}
		for _, r := range string(out) {
			if r != '\n' && r != '\t' && (unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)) {
				t.Fatalf("%q: output %q holds %U", in, out, r)
			}
		}
		b, err := json.Marshal(string(in))
		if err != nil {
			t.Fatal(err)
		}
		var s1, s2 string
		json.Unmarshal(b, &s1)
		if err := json.Unmarshal(escapeOutput(b), &s2); err != nil || s1 != s2 {
			t.Fatalf("%q: JSON %q became %q (%v)", in, b, escapeOutput(b), err)
		}
	})
}
