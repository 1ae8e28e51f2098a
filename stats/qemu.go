package stats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/netctl/netctl/qmp"
)

// Bounds on what QEMU's replies may hold: more is a malformed reply.
const (
	maxDevices = 1024 // virtio devices in one QEMU
	maxVQs     = 1024 // virtqueues of one device (virtio's VIRTIO_QUEUE_MAX)
	maxStrings = 64   // status names in one reply
)

// devicePath is the QOM path of a NIC's virtio device, for the
// x-query-virtio* commands: nic is the id (-device ...,id=ID) or already
// a QOM path.
func devicePath(nic string) string {
	if strings.HasPrefix(nic, "/") {
		if strings.HasSuffix(nic, "/virtio-backend") {
			return nic
		}
		return nic + "/virtio-backend"
	}
	return "/machine/peripheral/" + nic + "/virtio-backend"
}

// nicID turns a virtio device's QOM path back into the id users gave, or
// the device's QOM path when it has none.
func nicID(path string) string {
	p := strings.TrimSuffix(path, "/virtio-backend")
	if id, ok := strings.CutPrefix(p, "/machine/peripheral/"); ok && id != "" && !strings.Contains(id, "/") {
		return id
	}
	return p
}

// virtioStatus is the part of x-query-virtio-status (QEMU 7.2+) stats
// reads.
type virtioStatus struct {
	Name         string `json:"name"`
	NumVQs       int    `json:"num-vqs"`
	VhostStarted bool   `json:"vhost-started"`
	Started      bool   `json:"started"`
	Broken       bool   `json:"broken"`
	Status       struct {
		Statuses []string `json:"statuses"`
	} `json:"status"`
	VhostDev *struct {
		NVQs int `json:"nvqs"`
	} `json:"vhost-dev"`
	GuestFeatures struct {
		Transports []string `json:"transports"`
	} `json:"guest-features"`
}

// parseVirtioStatus decodes an x-query-virtio-status reply (untrusted).
func parseVirtioStatus(b []byte) (*virtioStatus, error) {
	var s virtioStatus
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("x-query-virtio-status reply: %v: %w", err, ErrInvalid)
	}
	if s.NumVQs < 0 || s.NumVQs > maxVQs {
		return nil, fmt.Errorf("x-query-virtio-status: num-vqs %d out of range 0-%d: %w", s.NumVQs, maxVQs, ErrInvalid)
	}
	if len(s.Status.Statuses) > maxStrings || len(s.GuestFeatures.Transports) > maxStrings {
		return nil, fmt.Errorf("x-query-virtio-status: %d statuses: %w", len(s.Status.Statuses), ErrInvalid)
	}
	return &s, nil
}

// driverOK says the guest's driver has the device running.
func (s *virtioStatus) driverOK() bool {
	for _, st := range s.Status.Statuses {
		if strings.Contains(st, "DRIVER_OK") {
			return true
		}
	}
	return false
}

// fingerprint changes when the driver resets the device or sets it up
// another way: ring addresses resolved before then are stale. It leaves
// out what changes while the rings stay where they are: vhost-started
// and vhost-dev (vhost stops while the VM is paused or its link is down,
// and starts again on resume), started.
func (s *virtioStatus) fingerprint() string {
	return fmt.Sprintf("%v/%v/%d/%v", s.Status.Statuses, s.Broken, s.NumVQs, s.GuestFeatures.Transports)
}

// accessPlatform says the guest negotiated VIRTIO_F_ACCESS_PLATFORM
// (bit 33; QEMU names it VIRTIO_F_IOMMU_PLATFORM): the device reaches
// guest memory through the platform's IOMMU, so ring addresses are I/O
// virtual addresses.
func (s *virtioStatus) accessPlatform() bool {
	for _, f := range s.GuestFeatures.Transports {
		switch name, _, _ := strings.Cut(f, ":"); strings.TrimSpace(name) {
		case "VIRTIO_F_IOMMU_PLATFORM", "VIRTIO_F_ACCESS_PLATFORM":
			return true
		}
	}
	return false
}

// packed says the guest negotiated packed rings (VIRTIO_F_RING_PACKED,
// feature bit 34).
func (s *virtioStatus) packed() bool {
	for _, f := range s.GuestFeatures.Transports {
		if name, _, _ := strings.Cut(f, ":"); strings.TrimSpace(name) == "VIRTIO_F_RING_PACKED" {
			return true
		}
	}
	return false
}

func queryVirtioStatus(ctx context.Context, c Monitor, path string) (*virtioStatus, error) {
	raw, err := c.Execute(ctx, "x-query-virtio-status", map[string]string{"path": path})
	if err != nil {
		return nil, qmpErr("x-query-virtio-status", err)
	}
	return parseVirtioStatus(raw)
}

// parseVirtioList decodes an x-query-virtio reply and returns the QOM
// paths of the virtio-net devices.
func parseVirtioList(b []byte) ([]string, error) {
	var devs []struct {
		Path string `json:"path"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal(b, &devs); err != nil {
		return nil, fmt.Errorf("x-query-virtio reply: %v: %w", err, ErrInvalid)
	}
	if len(devs) > maxDevices {
		return nil, fmt.Errorf("x-query-virtio lists %d devices, more than %d: %w", len(devs), maxDevices, ErrInvalid)
	}
	var nets []string
	for _, d := range devs {
		// QEMU names each device's virtio backend DEVICE/virtio-backend;
		// anything else is not a path the other commands take (and
		// describeNIC cuts the suffix off).
		dev, ok := strings.CutSuffix(d.Path, "/virtio-backend")
		if d.Name == "virtio-net" && ok && strings.HasPrefix(dev, "/") && len(dev) > 1 {
			nets = append(nets, d.Path)
		}
	}
	return nets, nil
}

// qmpErr wraps a QMP error; a missing command says which QEMU it needs.
func qmpErr(cmd string, err error) error {
	var qe *qmp.Error
	if errors.As(err, &qe) && qe.Class == "CommandNotFound" {
		return fmt.Errorf("QEMU has no %s: it needs QEMU 7.2 or newer: %w", cmd, ErrNotSupported)
	}
	return fmt.Errorf("%s: %w", cmd, err)
}
