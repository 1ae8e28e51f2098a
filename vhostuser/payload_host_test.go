package vhostuser

import (
	"encoding/binary"
	"go/ast"
	"go/parser"
	"go/token"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
)

// TestHostQEMUPayloadLimit measures this host's QEMU's largest accepted
// payload (VHOST_USER_PAYLOAD_SIZE, sizeof its VhostUserPayload union):
// it answers QEMU's first GET_FEATURES with a header announcing 65535
// bytes, and QEMU's refusal names its maximum. MaxPayload's comment must
// say what QEMU's limit is, and that it is not MaxPayload: QEMU's union
// holds the crypto device's session (632 bytes in QEMU 7.2), larger than
// any net request.
func TestHostQEMUPayloadLimit(t *testing.T) {
	testenv.Host(t)
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Fatalf("qemu-system-x86_64: %v (make vm-deps installs it)", err)
	}
	ver, _ := exec.Command(qemu, "--version").Output()
	sock := filepath.Join(t.TempDir(), "vu.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cmd := exec.Command(qemu, "-machine", "none", "-nodefaults", "-display", "none",
		"-chardev", "socket,id=c,path="+sock, "-netdev", "vhost-user,id=n,chardev=c")
	said := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = said, said
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	ln.(*net.UnixListener).SetDeadline(time.Now().Add(time.Minute))
	c, err := ln.Accept()
	if err != nil {
		t.Fatalf("QEMU did not connect: %v", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	hdr := make([]byte, HeaderSize)
	if _, err := c.Read(hdr); err != nil {
		t.Fatal(err)
	}
	if r := Request(binary.LittleEndian.Uint32(hdr)); r != GetFeatures {
		t.Fatalf("QEMU's first request is %v, want GET_FEATURES", r)
	}
	rep := make([]byte, HeaderSize)
	binary.LittleEndian.PutUint32(rep, uint32(GetFeatures))
	binary.LittleEndian.PutUint32(rep[4:], uint32(FlagReply|Version))
	binary.LittleEndian.PutUint32(rep[8:], 65535)
	if _, err := c.Write(rep); err != nil {
		t.Fatal(err)
	}
	// QEMU 7.2 reports the refusal and then stays, its netdev failed:
	// the line is what counts.
	re := regexp.MustCompile(`exceeds the maximum (\d+)`)
	var m []string
	for end := time.Now().Add(time.Minute); m == nil && time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		m = re.FindStringSubmatch(said.String())
	}
	if m == nil {
		t.Fatalf("QEMU's refusal names no maximum within a minute: %s", said.String())
	}
	limit, _ := strconv.Atoi(m[1])
	version, _, _ := strings.Cut(string(ver), "\n")
	t.Logf("%s: VHOST_USER_PAYLOAD_SIZE %d; MaxPayload %d", version, limit, MaxPayload)
	if limit <= MaxPayload {
		t.Errorf("QEMU's limit %d is not above MaxPayload %d: the bridge's bound and its comment need another look", limit, MaxPayload)
	}
	doc := maxPayloadDoc(t)
	if strings.Contains(string(ver), "version 7.2.") && !strings.Contains(doc, strconv.Itoa(limit)) {
		t.Errorf("MaxPayload's comment does not give QEMU 7.2's limit %d:\n%s", limit, doc)
	}
	if strings.Contains(doc, "refuse anything larger") {
		t.Errorf("MaxPayload's comment says QEMU refuses anything larger than %d; QEMU takes up to %d:\n%s", MaxPayload, limit, doc)
	}
}

// maxPayloadDoc is MaxPayload's doc comment in message.go.
func maxPayloadDoc(t *testing.T) string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "message.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok {
			continue
		}
		for _, s := range g.Specs {
			if v, ok := s.(*ast.ValueSpec); ok && len(v.Names) == 1 && v.Names[0].Name == "MaxPayload" {
				if v.Doc != nil {
					return v.Doc.Text()
				}
				return g.Doc.Text()
			}
		}
	}
	t.Fatal("message.go: no MaxPayload")
	return ""
}
