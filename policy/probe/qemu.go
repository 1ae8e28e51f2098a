package probe

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/netctl/netctl/policy/host"
)

// qemuBinary is the system emulator for this machine's architecture.
var qemuBinary = map[string]string{"amd64": "qemu-system-x86_64", "arm64": "qemu-system-aarch64"}[runtime.GOARCH]

// probeQEMU finds the QEMU in PATH and asks it its version.
func probeQEMU(q *host.QEMU) {
	path, err := exec.LookPath(qemuBinary)
	if err != nil {
		q.Error = fmt.Sprintf("no %s in PATH: %v", qemuBinary, err)
		return
	}
	q.Binary = path
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := &capped{max: 4096}
	cmd := exec.CommandContext(ctx, path, "--version")
	cmd.Stdout = out
	if err := cmd.Run(); err != nil {
		q.Error = fmt.Sprintf("%s --version: %v", path, err)
		return
	}
	v, err := ParseQEMUVersion(out.String())
	if err != nil {
		q.Error = fmt.Sprintf("%s --version: %v", path, err)
		return
	}
	q.Version = v
}

// ParseQEMUVersion reads the version from qemu-system-* --version output
// ("QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18)").
func ParseQEMUVersion(out string) (string, error) {
	line, _, _ := strings.Cut(out, "\n")
	_, rest, ok := strings.Cut(line, "QEMU emulator version ")
	if !ok {
		return "", fmt.Errorf("no \"QEMU emulator version\" in %.80q", line)
	}
	v, _, _ := strings.Cut(rest, " ")
	parts := strings.Split(v, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return "", fmt.Errorf("version %.32q is not MAJOR.MINOR[.MICRO]", v)
	}
	for _, p := range parts {
		if p == "" || len(p) > 6 || strings.Trim(p, "0123456789") != "" {
			return "", fmt.Errorf("version %.32q is not MAJOR.MINOR[.MICRO]", v)
		}
	}
	return v, nil
}

// capped keeps the first max bytes written to it.
type capped struct {
	bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.Len(); room > 0 {
		c.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
