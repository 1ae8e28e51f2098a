// Package hooks holds KubeVirt's hook sidecar API as netctl serves it:
// proto/ is KubeVirt's own .proto text (kubevirt/kubevirt pkg/hooks,
// Apache-2.0, Copyright The KubeVirt Authors: LICENSE.kubevirt), and info
// and v1alpha3 the Go code protoc generates from it (gen.sh, make proto),
// with KubeVirt's package names, services and field numbers, so the wire
// is virt-launcher's.
package hooks
