// Package policy decides, from a description of the host (policy/host,
// written by netctl probe) and a request, which backend to use (vDPA, then
// vhost-net, then QEMU's userspace path) and which features to offer the
// guest, with a reason for every step skipped and every feature left off,
// and the QEMU properties that enforce that set. What it offers is only
// what the chosen backend carries, closed under the virtio spec's feature
// requirements (Requirements).
//
// It is pure: it imports nothing that touches the kernel, and the same
// inputs give the same decision, so decisions can be tested, fuzzed and
// compared across hosts (Plan, for live migration).
package policy
