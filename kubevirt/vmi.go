package kubevirt

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/netctl/netctl/internal/errs"
)

// MaxVMI bounds the VMI JSON DefineDomain reads: an object Kubernetes
// stores is at most 1.5 MiB (etcd's request limit); twice that is not a
// VMI.
const MaxVMI = 3 << 20

// maxInterfaces bounds the interfaces and networks read from a VMI or the
// network-info file (KubeVirt's PCI slots allow far fewer).
const maxInterfaces = 1024

// vmi is what DefineDomain reads of a kubevirt.io/v1 VirtualMachineInstance
// (staging/src/kubevirt.io/api/core/v1/schema.go: the JSON names are
// KubeVirt's). Unknown fields are ignored: virt-launcher sends the whole
// object.
type vmi struct {
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec struct {
		Domain struct {
			CPU *struct {
				Cores   uint32 `json:"cores"`
				Sockets uint32 `json:"sockets"`
				Threads uint32 `json:"threads"`
			} `json:"cpu"`
			Devices struct {
				NetworkInterfaceMultiQueue *bool          `json:"networkInterfaceMultiqueue"`
				Interfaces                 []vmiInterface `json:"interfaces"`
			} `json:"devices"`
		} `json:"domain"`
		Networks []vmiNetwork `json:"networks"`
	} `json:"spec"`
}

// vmiInterface is spec.domain.devices.interfaces[].
type vmiInterface struct {
	Name    string `json:"name"`
	Model   string `json:"model"`
	Binding *struct {
		Name string `json:"name"`
	} `json:"binding"`
	MacAddress string `json:"macAddress"`
	PciAddress string `json:"pciAddress"`
	ACPIIndex  int    `json:"acpiIndex"`
	State      string `json:"state"`
}

// vmiNetwork is spec.networks[].
type vmiNetwork struct {
	Name   string    `json:"name"`
	Pod    *struct{} `json:"pod"`
	Multus *struct {
		NetworkName string `json:"networkName"`
	} `json:"multus"`
}

// parseVMI reads the VMI JSON virt-launcher sends (json.Marshal of a
// v1.VirtualMachineInstance), bounded.
func parseVMI(b []byte) (*vmi, error) {
	if len(b) > MaxVMI {
		return nil, fmt.Errorf("VMI JSON of %d bytes, over %d: %w", len(b), MaxVMI, errs.ErrInvalid)
	}
	var v vmi
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("VMI JSON: %s: %w", clip(err.Error()), errs.ErrInvalid)
	}
	if len(v.Spec.Domain.Devices.Interfaces) > maxInterfaces || len(v.Spec.Networks) > maxInterfaces {
		return nil, fmt.Errorf("VMI %s: over %d interfaces or networks: %w", clip(v.Metadata.Name), maxInterfaces, errs.ErrInvalid)
	}
	return &v, nil
}

// MultiQueueMaxQueues caps the queues of one interface, as KubeVirt caps
// them (pkg/virt-launcher/virtwrap/converter/network/virtio-queues.go,
// the kernel's MAX_TAP_QUEUES).
const MultiQueueMaxQueues = 256

// queues is the queue count of the VMI's interfaces: 0 (libvirt's one
// queue) unless spec.domain.devices.networkInterfaceMultiqueue, then one
// per vCPU as KubeVirt counts them (sockets * cores * threads, each 1
// when unset; vcpu/vcpu.go GetCPUTopology), or domainVCPUs (the domain's
// <vcpu>, which KubeVirt computed from the CPU requests) when the VMI
// sets no topology; at most MultiQueueMaxQueues.
func (v *vmi) queues(domainVCPUs uint) int {
	mq := v.Spec.Domain.Devices.NetworkInterfaceMultiQueue
	if mq == nil || !*mq {
		return 0
	}
	n := uint64(domainVCPUs)
	if c := v.Spec.Domain.CPU; c != nil && (c.Cores != 0 || c.Sockets != 0 || c.Threads != 0) {
		n = 1
		for _, x := range []uint32{c.Cores, c.Sockets, c.Threads} {
			if x != 0 {
				n *= uint64(x)
			}
			if n > MultiQueueMaxQueues {
				n = MultiQueueMaxQueues
			}
		}
	}
	if n == 0 {
		n = 1
	}
	return int(min(n, MultiQueueMaxQueues))
}

// clip bounds a string from outside for an error message.
func clip(s string) string {
	if len(s) > 120 {
		return fmt.Sprintf("%q...", s[:120])
	}
	return fmt.Sprintf("%q", s)
}
