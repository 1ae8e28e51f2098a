package probe

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/policy/host"
	"github.com/netctl/netctl/vdpa"
	"github.com/netctl/netctl/virtio"
)

// vdpaMigration answers, for each vdpa device, whether the host's QEMU
// (r.QEMU, already probed) can live-migrate a VM using it.
func vdpaMigration(r *Result, src sources) {
	for i := range r.VDPA.Devices {
		d := &r.VDPA.Devices[i]
		facts, why := src.vdpaFacts(*d)
		if facts == nil {
			d.Migration = &host.VDPAMigration{Reason: why}
			continue
		}
		m := policy.VDPAMigration(r.QEMU.Version, *facts)
		d.Migration = &m
	}
}

// vdpaOpenTimeout bounds the open of one device's vhost-vdpa node: the
// open resets the device, which a VDUSE daemon must answer.
const vdpaOpenTimeout = 5 * time.Second

// maxGroupQueues bounds the virtqueues whose group is read (QEMU reads
// every data queue's; a device has at most 2*0x8000+1).
const maxGroupQueues = 1024

// probeVDPAFacts reads a device's answers on its vhost-vdpa node. It
// opens the node only when no process holds it: vhost-vdpa takes one open
// at a time, and an open and its close each reset the device, so a VM's
// device (or one whose holders cannot all be seen) is left alone and
// reported "unknown: in use". A VMM that opens the node during the few
// milliseconds the probe holds it gets EBUSY; netctl attach does not probe
// this (Parts.VDPAMigration is netctl probe's only).
func probeVDPAFacts(d host.VDPADevice) (*host.VDPAFacts, string) {
	if d.Driver != vdpa.DriverVhostVDPA {
		drv := d.Driver
		if drv == "" {
			drv = "no driver"
		}
		return nil, fmt.Sprintf("unknown: bound to %s, not vhost_vdpa, so QEMU cannot use it (netctl vdpa dev bind %s vhost_vdpa)", drv, d.Name)
	}
	hs, err := vdpa.Holders(d.Name)
	if len(hs) > 0 {
		return nil, fmt.Sprintf("unknown: in use by %v (%s); the probe opens no device a VM may hold (opening resets it): probe again when it is free", hs[0], hs[0].Path)
	}
	if err != nil {
		return nil, "unknown: in use? " + err.Error() + "; not opened"
	}
	path, err := vdpa.VhostVDPAPath(d.Name)
	if err != nil {
		return nil, "unknown: " + err.Error()
	}
	ctx, cancel := context.WithTimeout(context.Background(), vdpaOpenTimeout)
	defer cancel()
	dev, err := vdpa.OpenVhost(ctx, path)
	if errors.Is(err, vdpa.ErrBusy) {
		return nil, "unknown: in use: " + err.Error()
	}
	if err != nil {
		return nil, "unknown: " + err.Error()
	}
	defer dev.Close()
	f, err := readVDPAFacts(dev)
	if err != nil {
		return nil, "unknown: " + err.Error()
	}
	return f, ""
}

// readVDPAFacts asks an open device what QEMU asks it
// (net_init_vhost_vdpa, vhost_vdpa_probe_cvq_isolation): its backend
// features and features, its queue count, groups and address spaces and,
// with a control virtqueue, whether that queue's group is no data queue's.
func readVDPAFacts(dev *vdpa.VhostDevice) (*host.VDPAFacts, error) {
	backend, err := dev.BackendFeatures()
	if err != nil {
		return nil, err
	}
	feats, err := dev.DeviceFeatures()
	if err != nil {
		return nil, err
	}
	f := &host.VDPAFacts{BackendFeatures: fmt.Sprintf("%#x", backend), Features: fmt.Sprintf("%#x", uint64(feats))}
	if f.VQs, err = dev.VQCount(); err != nil {
		return nil, err
	}
	// Both are 0 on a kernel without them (before 5.17): said so by
	// GroupError below when a control queue makes them matter.
	f.Groups, _ = dev.GroupNum()
	f.AddressSpaces, _ = dev.ASNum()
	if !feats.Has(virtio.NetCtrlVQ) {
		return f, nil
	}
	own, err := cvqOwnGroup(dev, feats, f.VQs)
	switch {
	case errors.Is(err, vdpa.ErrNotSupported):
		// QEMU takes "no groups" as "not isolated" (vhost_vdpa_probe_cvq_isolation).
		no := false
		f.CVQOwnGroup, f.GroupError = &no, err.Error()
	case err != nil:
		f.GroupError = err.Error()
	default:
		f.CVQOwnGroup = &own
	}
	return f, nil
}

// cvqOwnGroup does what QEMU's vhost_vdpa_probe_cvq_isolation
// (net/vhost-vdpa.c, 8.1+) does: it finds the control queue (index 2 *
// the config's max_virtqueue_pairs with MQ, else 2), negotiates the
// device's features (a parent such as mlx5_vdpa places the control queue
// by them), compares the control queue's group with every data queue's,
// and resets the status. The group ioctl answers the fd's owner only.
func cvqOwnGroup(dev *vdpa.VhostDevice, feats virtio.Features, vqs uint32) (bool, error) {
	pairs := uint32(1)
	if feats.Has(virtio.NetMQ) {
		b, err := dev.Config(8, 2) // struct virtio_net_config: max_virtqueue_pairs at 8, little-endian
		if err != nil {
			return false, err
		}
		pairs = uint32(binary.LittleEndian.Uint16(b))
	}
	cvq := 2 * pairs
	if cvq >= vqs || cvq > maxGroupQueues {
		return false, fmt.Errorf("control virtqueue index %d: the device has %d virtqueues (at most %d are read)", cvq, vqs, maxGroupQueues)
	}
	if err := dev.SetOwner(); err != nil {
		return false, err
	}
	const ackDriver = linux.VIRTIO_CONFIG_S_ACKNOWLEDGE | linux.VIRTIO_CONFIG_S_DRIVER
	defer dev.Reset()
	if err := dev.SetStatus(ackDriver); err != nil {
		return false, err
	}
	if err := dev.SetFeatures(uint64(feats)); err != nil {
		return false, err
	}
	if err := dev.SetStatus(ackDriver | linux.VIRTIO_CONFIG_S_FEATURES_OK); err != nil {
		return false, err
	}
	g, err := dev.VringGroup(cvq)
	if err != nil {
		return false, err
	}
	for i := range cvq {
		gi, err := dev.VringGroup(i)
		if err != nil {
			return false, err
		}
		if gi == g {
			return false, nil
		}
	}
	return true, nil
}
