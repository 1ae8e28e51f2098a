// Package nfd writes netctl's node features for Kubernetes' Node Feature
// Discovery: its local feature file
// (/etc/kubernetes/node-feature-discovery/features.d/netctl), which
// nfd-worker turns into node labels under netctl.dev/ (no NFD
// configuration needed: only kubernetes.io namespaces are denied by
// default). The labels say what the scheduler needs to place a VM
// (vhost-net, vdpa and its management devices, tap USO, zero-copy) and
// which migration-compatible pool a node is in (featureset, the id of
// the set netctl plan would offer on this node alone: equal on nodes
// that can carry the same set).
//
// Labels is pure (a probe in, labels out); Render and Write follow NFD's
// customization guide (local feature source): name=value lines, a
// "# +expiry-time=" directive, at most 64 KiB, written to a dot-file
// (NFD skips those) and renamed over the file.
package nfd
