// Package diagnose answers "why is TSO off in my guest?" for a running
// QEMU virtio-net NIC (netctl diagnose). It reads what the device offered,
// what the guest acknowledged and what the backend honours (QMP's
// x-query-virtio-status, the NIC's properties, the tap's offloads and
// header size, a vDPA device's negotiated features, the lower device's
// ethtool features) into a Snapshot, and explains every feature bit of it
// in a Report: a verdict and a one-line reason.
//
// Gathering (Gather) talks to QEMU and the host kernel; Explain is a pure
// function of a Snapshot, so a saved snapshot explains offline.
package diagnose
