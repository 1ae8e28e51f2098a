package exporter

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/netctl/netctl/stats"
)

// taintingSource is fakeSource whose libvirt targets were read through
// libvirt's monitor passthrough when tainted is set.
type taintingSource struct {
	*fakeSource
	tainted bool
}

func (f *taintingSource) Collect(ctx context.Context, ts []stats.Target) []stats.NICStats {
	out := f.fakeSource.Collect(ctx, ts)
	for i := range out {
		out[i].Tainted = f.tainted && out[i].Target.Libvirt != nil
	}
	return out
}

// TestExporterLibvirtDomainAndTaint: a libvirt domain's NIC carries the
// domain's UUID on netctl_nic_info (libvirt_domain; "" for a hand-run
// QEMU's) and netctl_nic_libvirt_tainted says whether the scrape asked
// QEMU through libvirt's monitor passthrough (--qemu-monitor), after
// which libvirt marks the domain tainted: the output says so, as stats
// and diagnose do (review: neither was in the exporter's output).
func TestExporterLibvirtDomainAndTaint(t *testing.T) {
	const uuid = "6a4f3b1e-0d2c-4e8f-9a7b-5c6d7e8f9a0b"
	src := &taintingSource{fakeSource: twoNICs(), tainted: true}
	src.targets[0].Libvirt = &stats.LibvirtTarget{URI: "qemu:///system", UUID: uuid, Alias: "net1"}
	src.targets[0].UUID = uuid // what stats.Collector fills in from the domain
	e := New(src, Options{})
	const want = `
# HELP netctl_nic_libvirt_tainted 1 if this scrape asked QEMU through libvirt's monitor passthrough for the NIC (--qemu-monitor), after which libvirt marks the domain "tainted: custom-monitor"; 0 if it read only what libvirt reports. Only for NICs of libvirt domains.
# TYPE netctl_nic_libvirt_tainted gauge
netctl_nic_libvirt_tainted{backend="vhost-net",nic="net1",vm="web1"} 1
`
	if err := testutil.CollectAndCompare(e, strings.NewReader(want), "netctl_nic_libvirt_tainted"); err != nil {
		t.Error(err)
	}
	const wantInfo = `
# HELP netctl_nic_info The NIC's host side: its link (tap or macvtap), QEMU netdev, QMP socket, vdpa device and libvirt domain (its UUID, for a NIC read through libvirt), and the VM's UUID (QEMU's query-uuid; "" when QEMU has none): the ring counters are the VM's, carried across QEMU processes of the same UUID; always 1.
# TYPE netctl_nic_info gauge
netctl_nic_info{backend="userspace",libvirt_domain="",link="nctl1",netdev="netctl-net1",nic="net1",qmp="/run/db1.qmp",uuid="",vdpa="",vm="db1"} 1
netctl_nic_info{backend="vhost-net",libvirt_domain="` + uuid + `",link="nctl0",netdev="netctl-net1",nic="net1",qmp="/run/web1.qmp",uuid="` + uuid + `",vdpa="",vm="web1"} 1
`
	if err := testutil.CollectAndCompare(e, strings.NewReader(wantInfo), "netctl_nic_info"); err != nil {
		t.Error(err)
	}
	src.tainted = false
	if err := testutil.CollectAndCompare(e, strings.NewReader(strings.Replace(want, "} 1", "} 0", 1)), "netctl_nic_libvirt_tainted"); err != nil {
		t.Error(err)
	}
}
