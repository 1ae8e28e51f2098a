package exporter

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/stats"
	"github.com/netctl/netctl/test/l2"
)

// testMigrationSeries: the exporter, given both QMP sockets (--qmp), while
// a VM with a UUID migrates to another QEMU on this host and both QEMUs
// have its NIC: firmware-only QEMUs (iPXE's DHCP on a vhost-net NIC, net0,
// QEMU's own tap), the source migrating into a file and staying, paused,
// until it quits; the destination loading it (-incoming) on a tap of its
// own. Scraped before, during and after, the ring counter series
// (vm="exmig", nic="net0") never go back, are the same right after the
// switchover (the indices carried over), and netctl_nic_info names the
// QEMU counting them (the source, then the destination) and the UUID.
// The logic is the kernel's neither way: 6.12 only.
func testMigrationSeries(t *testing.T, k *testenv.Kernel) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const uuid = "0b6c1f5e-2f7d-4a8e-9c3b-7d1e5f9a2c64"
	state := l2.Run + "/exmig.state"
	qemu := func(name, tap string, extra ...string) *l2.Guest {
		t.Helper()
		args := append([]string{"-name", "exmig", "-uuid", uuid,
			"-netdev", "tap,id=hn0,ifname=" + tap + ",script=no,downscript=no,vhost=on",
			"-device", "virtio-net-pci,netdev=hn0,id=net0,mac=52:54:00:97:00:02"}, extra...)
		g, err := l2.StartFirmware(ctx, l2.Firmware{Name: name, Extra: args})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		return g
	}
	run := func(g *l2.Guest, cmd string, args any) json.RawMessage {
		t.Helper()
		qc, err := qmp.Dial(ctx, g.QMP)
		if err != nil {
			t.Fatal(err)
		}
		defer qc.Close()
		raw, err := qc.Execute(ctx, cmd, args)
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		return raw
	}
	waitMigrated := func(g *l2.Guest) {
		t.Helper()
		for ctx.Err() == nil {
			var st struct {
				Status string `json:"status"`
			}
			json.Unmarshal(run(g, "query-migrate", nil), &st)
			if st.Status == "completed" {
				return
			}
			if st.Status == "failed" || st.Status == "cancelled" {
				t.Fatalf("migration %s:\n%s", st.Status, g.Stderr())
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Fatal("migration not done")
	}

	src := qemu("exmiga", "exmiga")
	source := &StatsSource{StateDir: t.TempDir(), QMPs: []string{src.QMP}, Collector: stats.NewCollector(stats.Options{Deadline: 30 * time.Second})}
	e := New(source, Options{ScrapeTimeout: time.Minute})
	series := []map[string]string{}
	for _, dir := range []string{"rx", "tx"} {
		series = append(series, map[string]string{"vm": "exmig", "nic": "net0", "queue": "0", "direction": dir})
	}
	var last []float64
	// scrape checks that every ring counter series is there and not below
	// the last scrape's, that netctl_nic_info names qmp, and returns them.
	scrape := func(when, qmpSock string) []float64 {
		t.Helper()
		mfs := gathered(t, e)
		var vs []float64
		for _, name := range []string{"netctl_queue_offered_descriptors_total", "netctl_queue_completed_descriptors_total"} {
			for i, l := range series {
				v, ok := sample(mfs, name, l)
				if !ok {
					t.Fatalf("%s: no %s%v", when, name, l)
				}
				if n := len(vs); last != nil && v < last[n] {
					t.Errorf("%s: %s{direction=%q} went back: %v after %v", when, name, series[i]["direction"], v, last[n])
				}
				vs = append(vs, v)
			}
		}
		if _, ok := sample(mfs, "netctl_nic_info", map[string]string{"vm": "exmig", "nic": "net0", "qmp": qmpSock, "uuid": uuid}); !ok {
			t.Errorf("%s: netctl_nic_info does not name %s and the UUID: %v", when, qmpSock, infoOf(mfs))
		}
		t.Logf("%s: offered rx, tx %v, completed rx, tx %v", when, vs[:2], vs[2:])
		last = vs
		return vs
	}
	run(src, "cont", nil)
	for ctx.Err() == nil { // iPXE has set up its rings and sent
		mfs := gathered(t, e)
		if v, ok := sample(mfs, "netctl_queue_completed_descriptors_total", series[1]); ok && v > 0 {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	scrape("source running", src.QMP)
	run(src, "migrate", map[string]string{"uri": "exec:cat > " + state})
	waitMigrated(src)
	migrated := scrape("source migrated", src.QMP)

	dst := qemu("exmigb", "exmigb", "-incoming", "exec:cat "+state)
	waitMigrated(dst)
	source.QMPs = append(source.QMPs, dst.QMP)
	if got := scrape("destination loaded, source paused", dst.QMP); !equalFloats(got, migrated) {
		t.Errorf("right after the switchover: %v, the source's last %v: want the same (the indices carried over)", got, migrated)
	}
	run(dst, "cont", nil)
	time.Sleep(3 * time.Second)
	scrape("destination running, source paused", dst.QMP)
	src.Close()
	scrape("source quit", dst.QMP)
}

func equalFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
