// Package policy decides, from a probe of the host and a request, which
// backend to use (vDPA, then vhost-net, then the VMM's userspace path) and
// which features to offer, with a reason for every decision. (In progress:
// see the policy issue.)
package policy
