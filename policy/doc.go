// Package policy decides, from a probe of the host (policy/probe) and a
// request, which backend to use (vDPA, then vhost-net, then the VMM's
// userspace path) and which features to offer the guest, with a reason
// for every step skipped and every feature left off. It is pure: the same
// inputs give the same decision, so decisions can be tested, fuzzed and
// compared across hosts (Plan, for live migration).
package policy
