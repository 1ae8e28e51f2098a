// Package kubernetes_test checks deploy/kubernetes's manifests: each is
// decoded strictly (an unknown or misspelt field fails) into k8s.io/api's
// types, or, for KubeVirt's and Multus's kinds, into the local mirrors of
// their types (kubevirt_types_test.go), and the manifests agree with each
// other and with netctl (binding name, image, NAD name, paths).
package kubernetes_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/netctl/netctl/kubevirt"
	"github.com/netctl/netctl/nfd"
)

// decoded is every object of the manifests, by kind.
type decoded struct {
	kubeVirt   []kubeVirt
	vmis       []vmi
	nads       []networkAttachmentDefinition
	daemonSets []appsv1.DaemonSet
	configMaps []corev1.ConfigMap
	namespaces []corev1.Namespace
}

// decodeStrict decodes one YAML document into its kind's type, failing
// on a field the type does not have.
func decodeStrict(doc []byte, d *decoded) error {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return err
	}
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return err
	}
	// As the API server decodes: field names case-sensitive, unknown and
	// duplicate fields errors (encoding/json, which yaml.UnmarshalStrict
	// uses, takes "hostpath" for hostPath).
	into := func(v any) error {
		strict, err := kjson.UnmarshalStrict(j, v, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
		if err != nil {
			return err
		}
		return errors.Join(strict...)
	}
	switch tm.APIVersion + " " + tm.Kind {
	case "kubevirt.io/v1 KubeVirt":
		var o kubeVirt
		if err := into(&o); err != nil {
			return err
		}
		d.kubeVirt = append(d.kubeVirt, o)
	case "kubevirt.io/v1 VirtualMachineInstance":
		var o vmi
		if err := into(&o); err != nil {
			return err
		}
		d.vmis = append(d.vmis, o)
	case "k8s.cni.cncf.io/v1 NetworkAttachmentDefinition":
		var o networkAttachmentDefinition
		if err := into(&o); err != nil {
			return err
		}
		d.nads = append(d.nads, o)
	case "apps/v1 DaemonSet":
		var o appsv1.DaemonSet
		if err := into(&o); err != nil {
			return err
		}
		d.daemonSets = append(d.daemonSets, o)
	case "v1 ConfigMap":
		var o corev1.ConfigMap
		if err := into(&o); err != nil {
			return err
		}
		d.configMaps = append(d.configMaps, o)
	case "v1 Namespace":
		var o corev1.Namespace
		if err := into(&o); err != nil {
			return err
		}
		d.namespaces = append(d.namespaces, o)
	default:
		return fmt.Errorf("kind %q of %q: the test knows no type for it: add one", tm.Kind, tm.APIVersion)
	}
	return nil
}

// documents splits a YAML stream on its --- lines.
func documents(b []byte) [][]byte {
	var out [][]byte
	for _, d := range bytes.Split(b, []byte("\n---\n")) {
		if len(bytes.TrimSpace(d)) > 0 {
			out = append(out, d)
		}
	}
	return out
}

func decodeAll(t *testing.T) *decoded {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) < 4 {
		t.Fatalf("manifests: %v %v", files, err)
	}
	d := &decoded{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range documents(b) {
			if err := decodeStrict(doc, d); err != nil {
				t.Errorf("%s, document %d: %v", f, i+1, err)
			}
		}
	}
	return d
}

// TestManifestsDecodeStrictly: every manifest decodes strictly, and a
// misspelt field in any of the kinds is caught, a wrong case too (so the
// strictness is real: it failed on downwardApi, hostpath and mountpath
// while the test used yaml.UnmarshalStrict, whose encoding/json matches
// names case-insensitively).
func TestManifestsDecodeStrictly(t *testing.T) {
	d := decodeAll(t)
	if len(d.kubeVirt) != 1 || len(d.vmis) != 1 || len(d.nads) != 1 || len(d.daemonSets) != 1 || len(d.configMaps) != 1 || len(d.namespaces) != 1 {
		t.Fatalf("decoded %d KubeVirt, %d VMI, %d NAD, %d DaemonSet, %d ConfigMap, %d Namespace", len(d.kubeVirt), len(d.vmis), len(d.nads), len(d.daemonSets), len(d.configMaps), len(d.namespaces))
	}
	typos := []struct{ file, from, to string }{
		{"kubevirt-binding.yaml", "sidecarImage:", "sidecarImg:"},
		{"kubevirt-binding.yaml", "downwardAPI:", "downwardApi:"},
		{"vmi-example.yaml", "networkInterfaceMultiqueue:", "networkInterfaceMultiQueue:"},
		{"vmi-example.yaml", "networkName:", "network:"},
		{"network-attachment-definition.yaml", "config: |-", "conf: |-"},
		{"node.yaml", "hostPath:", "hostpath:"},
		{"node.yaml", "mountPath: /run/netctl", "mountpath: /run/netctl"},
	}
	for _, ty := range typos {
		b, err := os.ReadFile(ty.file)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte(ty.from)) {
			t.Fatalf("%s has no %q", ty.file, ty.from)
		}
		bad := bytes.Replace(b, []byte(ty.from), []byte(ty.to), 1)
		failed := false
		for _, doc := range documents(bad) {
			if decodeStrict(doc, &decoded{}) != nil {
				failed = true
			}
		}
		if !failed {
			t.Errorf("%s with %q for %q decodes: the decoding is not strict", ty.file, ty.to, ty.from)
		}
	}
}

// TestManifestsAgree: the manifests name each other and netctl right.
func TestManifestsAgree(t *testing.T) {
	d := decodeAll(t)
	if t.Failed() {
		return
	}
	kv := d.kubeVirt[0]
	if kv.Spec.Configuration.Network == nil {
		t.Fatal("the KubeVirt patch has no spec.configuration.network")
	}
	b, ok := kv.Spec.Configuration.Network.Binding[kubevirt.DefaultBindingName]
	if !ok {
		t.Fatalf("no binding %q (the sidecar's default name) in %v", kubevirt.DefaultBindingName, kv.Spec.Configuration.Network.Binding)
	}
	if b.DomainAttachmentType != "tap" || b.DownwardAPI != "device-info" || b.Migration == nil || b.SidecarImage == "" {
		t.Errorf("binding %+v: want domainAttachmentType tap, downwardAPI device-info, migration and an image", b)
	}

	// The NAD: netctl's CNI config, strictly.
	nad := d.nads[0]
	dec := json.NewDecoder(strings.NewReader(nad.Spec.Config))
	dec.DisallowUnknownFields()
	var cc netctlCNIConfig
	if err := dec.Decode(&cc); err != nil {
		t.Fatalf("the NAD's config: %v", err)
	}
	if cc.Type != "netctl" || cc.Name != nad.Metadata.Name || cc.CNIVersion == "" || !cc.Capabilities["CNIDeviceInfoFile"] {
		t.Errorf("the NAD's config %+v: want type netctl, its name, a cniVersion and the CNIDeviceInfoFile capability", cc)
	}

	// The VMI uses the binding on that NAD, with multiqueue.
	v := d.vmis[0]
	if len(v.Spec.Domain.Devices.Interfaces) == 0 {
		t.Fatal("the example VMI has no interface")
	}
	for _, it := range v.Spec.Domain.Devices.Interfaces {
		if it.Binding == nil || it.Binding.Name != kubevirt.DefaultBindingName {
			t.Errorf("interface %s: binding %+v, want %s", it.Name, it.Binding, kubevirt.DefaultBindingName)
		}
		i := slices.IndexFunc(v.Spec.Networks, func(n struct {
			Name   string    `json:"name"`
			Pod    *struct{} `json:"pod,omitempty"`
			Multus *struct {
				NetworkName string `json:"networkName"`
				Default     bool   `json:"default,omitempty"`
			} `json:"multus,omitempty"`
		}) bool {
			return n.Name == it.Name
		})
		if i < 0 || v.Spec.Networks[i].Multus == nil || v.Spec.Networks[i].Multus.NetworkName != nad.Metadata.Name {
			t.Errorf("interface %s: no multus network on NAD %s", it.Name, nad.Metadata.Name)
		}
	}
	if mq := v.Spec.Domain.Devices.NetworkInterfaceMultiQueue; mq == nil || !*mq {
		t.Errorf("the example VMI has no networkInterfaceMultiqueue")
	}
	aff := v.Spec.Affinity
	if aff == nil || aff.NodeAffinity == nil || aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		t.Fatal("the example VMI has no required node affinity")
	}
	var keys []string
	for _, term := range aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			keys = append(keys, e.Key)
		}
	}
	if !slices.Contains(keys, "netctl.dev/featureset") || !slices.Contains(keys, "netctl.dev/vhost-net") {
		t.Errorf("the VMI's node affinity keys %v: want netctl.dev/featureset and netctl.dev/vhost-net", keys)
	}

	// The DaemonSet: NFD's directory, the CNI bin dir, nfd write in a loop, the exporter, one image.
	ds := d.daemonSets[0]
	paths := map[string]string{}
	for _, vol := range ds.Spec.Template.Spec.Volumes {
		if vol.HostPath != nil {
			paths[vol.Name] = vol.HostPath.Path
		}
	}
	for _, want := range []string{nfd.DefaultDir, "/opt/cni/bin", "/run/netctl", "/etc/netctl"} {
		if !slices.Contains(slices.Collect(maps.Values(paths)), want) {
			t.Errorf("the DaemonSet mounts no hostPath %s: %v", want, paths)
		}
	}
	cmds := map[string]string{}
	for _, c := range slices.Concat(ds.Spec.Template.Spec.InitContainers, ds.Spec.Template.Spec.Containers) {
		cmds[c.Name] = strings.Join(c.Command, " ")
		if c.Image != b.SidecarImage {
			t.Errorf("container %s runs %s, the binding's sidecar %s: one image", c.Name, c.Image, b.SidecarImage)
		}
	}
	if !strings.Contains(cmds["nfd"], "netctl nfd write --every") || !strings.HasPrefix(cmds["exporter"], "/usr/bin/netctl exporter") ||
		!strings.Contains(cmds["install-cni"], "/host/opt/cni/bin/netctl") {
		t.Errorf("the DaemonSet's commands %q", cmds)
	}
	if !slices.ContainsFunc(ds.Spec.Template.Spec.Containers, func(c corev1.Container) bool {
		return c.Name == "nfd" && slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
			return m.MountPath == nfd.DefaultDir && paths[m.Name] == nfd.DefaultDir
		})
	}) {
		t.Errorf("the nfd container does not write NFD's directory %s of the node", nfd.DefaultDir)
	}

	// The image runs the sidecar by default (KubeVirt sets no command).
	cf, err := os.ReadFile("Containerfile")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cf), `ENTRYPOINT ["/usr/bin/netctl", "kubevirt", "sidecar"]`) {
		t.Errorf("the Containerfile's entrypoint is not netctl kubevirt sidecar")
	}
}

// TestManifestsPodSecurity: the namespace of a DaemonSet with privileged
// containers or hostPath volumes carries Pod Security admission's
// enforce=privileged label: a cluster whose default level is baseline or
// restricted (set in its AdmissionConfiguration, as hardened and some
// managed distributions do) otherwise refuses the DaemonSet's pods, which
// strict decoding cannot see.
func TestManifestsPodSecurity(t *testing.T) {
	d := decodeAll(t)
	if t.Failed() {
		return
	}
	for _, ds := range d.daemonSets {
		spec := ds.Spec.Template.Spec
		needs := spec.HostNetwork
		for _, v := range spec.Volumes {
			needs = needs || v.HostPath != nil
		}
		for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
			needs = needs || c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged
		}
		if !needs {
			continue
		}
		i := slices.IndexFunc(d.namespaces, func(n corev1.Namespace) bool { return n.Name == ds.Namespace })
		if i < 0 {
			t.Errorf("DaemonSet %s: its namespace %s is not in the manifests", ds.Name, ds.Namespace)
			continue
		}
		if got := d.namespaces[i].Labels["pod-security.kubernetes.io/enforce"]; got != "privileged" {
			t.Errorf("namespace %s holds DaemonSet %s (privileged, hostPath, hostNetwork) but its pod-security.kubernetes.io/enforce label is %q, want privileged",
				ds.Namespace, ds.Name, got)
		}
	}
}
