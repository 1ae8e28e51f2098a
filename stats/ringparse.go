package stats

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// errNoRing: the guest's driver has not given the queue a ring.
var errNoRing = fmt.Errorf("the ring has no address yet (the guest's driver has not set it up): %w", ErrNotAvailable)

// queueAddrs are one virtqueue's ring addresses, guest-physical.
type queueAddrs struct {
	Avail, Used uint64
	Num         int
}

// parseQueueStatus decodes an x-query-virtio-queue-status reply (QEMU
// 7.2+; untrusted): vring-avail and vring-used are the guest-physical
// addresses the guest's driver gave the device.
func parseQueueStatus(b []byte) (queueAddrs, error) {
	var r struct {
		Avail *uint64 `json:"vring-avail"`
		Used  *uint64 `json:"vring-used"`
		Num   int     `json:"vring-num"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return queueAddrs{}, fmt.Errorf("x-query-virtio-queue-status reply: %v: %w", err, ErrInvalid)
	}
	if r.Avail == nil || r.Used == nil {
		return queueAddrs{}, fmt.Errorf("x-query-virtio-queue-status reply has no vring-avail or vring-used: %w", ErrInvalid)
	}
	return checkAddrs(queueAddrs{Avail: *r.Avail, Used: *r.Used, Num: r.Num}, "x-query-virtio-queue-status")
}

// parseVhostQueueStatus decodes an x-query-virtio-vhost-queue-status
// reply (QEMU 7.2+; untrusted): avail-phys and used-phys are the rings'
// guest-physical addresses (avail and used are vhost's own mappings of
// them in QEMU, not used here so that one method serves every backend).
func parseVhostQueueStatus(b []byte) (queueAddrs, error) {
	var r struct {
		Avail *uint64 `json:"avail-phys"`
		Used  *uint64 `json:"used-phys"`
		Num   int     `json:"num"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return queueAddrs{}, fmt.Errorf("x-query-virtio-vhost-queue-status reply: %v: %w", err, ErrInvalid)
	}
	if r.Avail == nil || r.Used == nil {
		return queueAddrs{}, fmt.Errorf("x-query-virtio-vhost-queue-status reply has no avail-phys or used-phys: %w", ErrInvalid)
	}
	return checkAddrs(queueAddrs{Avail: *r.Avail, Used: *r.Used, Num: r.Num}, "x-query-virtio-vhost-queue-status")
}

func checkAddrs(a queueAddrs, cmd string) (queueAddrs, error) {
	switch {
	case a.Num < 0 || a.Num > 32768:
		return a, fmt.Errorf("%s: ring size %d out of range 0-32768: %w", cmd, a.Num, ErrInvalid)
	case a.Avail == 0 || a.Used == 0:
		return a, fmt.Errorf("%s: %w", cmd, errNoRing)
	case a.Avail%2 != 0 || a.Used%4 != 0 || a.Avail > 1<<62 || a.Used > 1<<62:
		return a, fmt.Errorf("%s: ring addresses avail %#x used %#x are misaligned or out of range: %w", cmd, a.Avail, a.Used, ErrInvalid)
	}
	return a, nil
}

// maxHMPReply bounds the HMP text parseGPA2HVA reads.
const maxHMPReply = 4096

// parseGPA2HVA reads the host virtual address from HMP gpa2hva's answer:
//
//	Host virtual address for 0x1000 (pc.ram) is 0x7fc943e01000
//
// Anything else ("No memory is mapped at address 0x...", an error) is
// an error carrying QEMU's words.
func parseGPA2HVA(out string) (uint64, error) {
	if len(out) > maxHMPReply {
		return 0, fmt.Errorf("gpa2hva: a %d-byte answer: %w", len(out), ErrInvalid)
	}
	s := strings.TrimSpace(out)
	const prefix = "Host virtual address for "
	i := strings.LastIndex(s, " is 0x")
	if !strings.HasPrefix(s, prefix) || i < 0 || strings.ContainsAny(s, "\r\n") {
		return 0, fmt.Errorf("gpa2hva: QEMU said %q: %w", s, ErrNotAvailable)
	}
	v, err := strconv.ParseUint(s[i+len(" is 0x"):], 16, 64)
	if err != nil || v == 0 {
		return 0, fmt.Errorf("gpa2hva: QEMU said %q: %w", s, ErrInvalid)
	}
	return v, nil
}
