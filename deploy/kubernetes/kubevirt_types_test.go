package kubernetes_test

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The types k8s.io/api lacks, mirroring only the fields the manifests use
// with KubeVirt's own JSON names (kubevirt/kubevirt d923fdb815,
// staging/src/kubevirt.io/api/core/v1 types.go and schema.go; the
// NetworkAttachmentDefinition's from k8snetworkplumbingwg's
// network-attachment-definition-client types.go). Strict decoding into
// them fails on any other field: a field added to a manifest must be
// added here, from KubeVirt's types, first.

// kubeVirt is the KubeVirt CR (types.go KubeVirt, KubeVirtSpec.Configuration,
// KubeVirtConfiguration.NetworkConfiguration).
type kubeVirt struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            struct {
		Configuration struct {
			Network *struct {
				Binding map[string]interfaceBindingPlugin `json:"binding,omitempty"`
			} `json:"network,omitempty"`
		} `json:"configuration,omitempty"`
	} `json:"spec"`
}

// interfaceBindingPlugin is types.go InterfaceBindingPlugin, whole.
type interfaceBindingPlugin struct {
	SidecarImage                string `json:"sidecarImage,omitempty"`
	NetworkAttachmentDefinition string `json:"networkAttachmentDefinition,omitempty"`
	DomainAttachmentType        string `json:"domainAttachmentType,omitempty"`
	Migration                   *struct {
		Method string `json:"method,omitempty"`
	} `json:"migration,omitempty"`
	DownwardAPI             string `json:"downwardAPI,omitempty"`
	ComputeResourceOverhead *struct {
		Limits   corev1.ResourceList `json:"limits,omitempty"`
		Requests corev1.ResourceList `json:"requests,omitempty"`
	} `json:"computeResourceOverhead,omitempty"`
}

// vmi is types.go VirtualMachineInstance with the VirtualMachineInstanceSpec
// fields the example uses (schema.go DomainSpec, CPU, Memory, Devices,
// Disk/DiskDevice/DiskTarget, Interface/PluginBinding, Network/MultusNetwork,
// Volume/VolumeSource, ContainerDiskSource, CloudInitNoCloudSource).
type vmi struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            struct {
		Affinity *corev1.Affinity `json:"affinity,omitempty"`
		Domain   struct {
			CPU *struct {
				Cores   uint32 `json:"cores,omitempty"`
				Sockets uint32 `json:"sockets,omitempty"`
				Threads uint32 `json:"threads,omitempty"`
			} `json:"cpu,omitempty"`
			Memory *struct {
				Guest *resource.Quantity `json:"guest,omitempty"`
			} `json:"memory,omitempty"`
			Devices struct {
				NetworkInterfaceMultiQueue *bool `json:"networkInterfaceMultiqueue,omitempty"`
				Disks                      []struct {
					Name string `json:"name"`
					Disk *struct {
						Bus string `json:"bus,omitempty"`
					} `json:"disk,omitempty"`
				} `json:"disks,omitempty"`
				Interfaces []struct {
					Name    string `json:"name"`
					Binding *struct {
						Name string `json:"name"`
					} `json:"binding,omitempty"`
					MacAddress string `json:"macAddress,omitempty"`
				} `json:"interfaces,omitempty"`
			} `json:"devices"`
		} `json:"domain"`
		Networks []struct {
			Name   string    `json:"name"`
			Pod    *struct{} `json:"pod,omitempty"`
			Multus *struct {
				NetworkName string `json:"networkName"`
				Default     bool   `json:"default,omitempty"`
			} `json:"multus,omitempty"`
		} `json:"networks,omitempty"`
		Volumes []struct {
			Name          string `json:"name"`
			ContainerDisk *struct {
				Image string `json:"image"`
			} `json:"containerDisk,omitempty"`
			CloudInitNoCloud *struct {
				UserData string `json:"userData,omitempty"`
			} `json:"cloudInitNoCloud,omitempty"`
		} `json:"volumes,omitempty"`
	} `json:"spec"`
}

// networkAttachmentDefinition is k8s.cni.cncf.io/v1
// NetworkAttachmentDefinition: spec.config is the CNI configuration JSON.
type networkAttachmentDefinition struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            struct {
		Config string `json:"config"`
	} `json:"spec"`
}

// netctlCNIConfig is the NAD's config as netctl's CNI plugin reads it:
// the CNI keys and netctl's own (cni/config.go keys).
type netctlCNIConfig struct {
	CNIVersion   string          `json:"cniVersion"`
	Name         string          `json:"name"`
	Type         string          `json:"type"`
	Capabilities map[string]bool `json:"capabilities,omitempty"`
	Queues       int             `json:"queues,omitempty"`
	Profile      string          `json:"profile,omitempty"`
	Owner        *int            `json:"owner,omitempty"`
	MTU          int             `json:"mtu,omitempty"`
	Plan         string          `json:"plan,omitempty"`
	Backend      string          `json:"backend,omitempty"`
	Master       string          `json:"master,omitempty"`
	Mode         string          `json:"mode,omitempty"`
	Mgmtdev      string          `json:"mgmtdev,omitempty"`
	MAC          string          `json:"mac,omitempty"`
}
