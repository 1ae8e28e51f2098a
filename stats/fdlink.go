package stats

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// maxFDInfo bounds a /proc/PID/fdinfo/N read.
const maxFDInfo = 16 << 10

// passedFDs are the descriptor numbers of a tap netdev QEMU got as fds
// ("fd=85" or "fds=85:86" in info network), at most 1024.
func passedFDs(opts map[string]string) []int {
	var out []int
	for _, key := range []string{"fd", "fds"} {
		for _, f := range strings.Split(opts[key], ":") {
			if n, err := strconv.Atoi(f); err == nil && n >= 0 && len(out) < 1024 {
				out = append(out, n)
			}
		}
	}
	return out
}

// fdLink names the link behind QEMU's fd: a tap by tun's fdinfo line
// "iff:\tNAME" (Linux 3.14+), a macvtap by its character device
// /dev/tapIFINDEX (the name is then "", the ifindex set).
func fdLink(pid, fd int) (name string, ifindex int, err error) {
	dir := filepath.Join(ProcRoot, strconv.Itoa(pid))
	target, err := os.Readlink(filepath.Join(dir, "fd", strconv.Itoa(fd)))
	if err != nil {
		return "", 0, fmt.Errorf("QEMU's fd %d: %w", fd, err)
	}
	if n, ok := strings.CutPrefix(filepath.Base(target), "tap"); ok && strings.HasPrefix(target, "/dev/") {
		if i, err := strconv.Atoi(n); err == nil && i > 0 {
			return "", i, nil
		}
	}
	f, err := os.Open(filepath.Join(dir, "fdinfo", strconv.Itoa(fd)))
	if err != nil {
		return "", 0, fmt.Errorf("QEMU's fd %d: %w", fd, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFDInfo))
	if err != nil {
		return "", 0, fmt.Errorf("QEMU's fd %d: %w", fd, err)
	}
	name = parseIff(b)
	if name == "" {
		return "", 0, fmt.Errorf("QEMU's fd %d (%s) is not a tap", fd, target)
	}
	return name, 0, nil
}

// parseIff finds tun's "iff:" line in fdinfo text (untrusted).
func parseIff(b []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "iff:"); ok {
			v = strings.TrimSpace(v)
			if len(v) > 0 && len(v) < 16 && !strings.ContainsAny(v, "/ \t") {
				return v
			}
		}
	}
	return ""
}
