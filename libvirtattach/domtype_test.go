package libvirtattach

import (
	"strings"
	"testing"

	"github.com/netctl/netctl/policy"
)

// TestDecideNoVhostNetWithoutKVM: libvirt opens /dev/vhost-net only for
// a domain of type 'kvm' (qemuInterfaceOpenVhostNet), whatever <driver
// name='vhost'> says: on a type='qemu' (TCG) domain the chain passes
// vhost-net by with that reason (auto gives userspace) and --backend
// vhost-net is refused, where before it was "decided" and QEMU ran
// without vhost-net (seen in TestVMLibvirtdAttach: no /dev/vhost-net fd).
func TestDecideNoVhostNetWithoutKVM(t *testing.T) {
	p := probe612(t)
	dec, err := decide(t.Context(), Request{Queues: 1, Probe: p}, nil, "7.2.0", "", "qemu")
	if err != nil {
		t.Fatal(err)
	}
	var why string
	for _, s := range dec.Steps {
		if s.Backend == policy.BackendVhostNet {
			why = s.Reason
		}
	}
	if dec.Backend != policy.BackendUserspace || !strings.Contains(why, "type 'kvm'") {
		t.Errorf("auto on a type='qemu' domain: %s, vhost-net's step %q", dec.Backend, why)
	}
	if _, err := decide(t.Context(), Request{Backend: policy.BackendVhostNet, Queues: 1, Probe: p}, nil, "7.2.0", "", "qemu"); err == nil ||
		!strings.Contains(err.Error(), "type 'kvm'") {
		t.Errorf("--backend vhost-net on a type='qemu' domain: %v", err)
	}
	if dec, err := decide(t.Context(), Request{Backend: policy.BackendVhostNet, Queues: 1, Probe: p}, nil, "7.2.0", "", "kvm"); err != nil || dec.Backend != policy.BackendVhostNet {
		t.Errorf("--backend vhost-net on a type='kvm' domain: %s %v", dec.Backend, err)
	}
}
