// Package diagnose answers "why is TSO off in my guest?" for a running
// QEMU virtio-net NIC (netctl diagnose): it explains every feature bit of a
// Snapshot (what the device offered, what the guest acknowledged, what the
// backend honours, what the lower device does in hardware) in a Report: a
// verdict and a one-line reason, as JSON or a table.
//
// The package is pure: it opens no device and no socket, and imports
// nothing that does (TestExplanationIsPure holds it to that). Filling a
// Snapshot from a running QEMU and the host kernel is package
// policy/diagnose/gather's job; a snapshot saved with Save (netctl
// diagnose --save) explains on any machine with Load and Explain.
//
// Everything Load and Decode read is untrusted: a snapshot file or a QMP
// reply saved with virsh. They refuse input over MaxSnapshotSize and lists
// longer than a virtio device can make them, with an error that wraps
// ErrInvalid, and never panic (FuzzDecode).
package diagnose
