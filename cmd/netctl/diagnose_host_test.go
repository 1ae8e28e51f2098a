package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/policy/diagnose"
	"github.com/netctl/netctl/policy/diagnose/gather"
	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/test/vm"
)

// TestHostDiagnoseRealQEMU boots Debian's 6.12 kernel under a real QEMU on
// this host (TCG; the host has no vhost-net, so vhost=off) with a
// virtio-net NIC on a tap netctl made. netctl diagnose --json must report
// the feature word the guest's own driver shows in
// /sys/class/net/eth0/device/features, see the offloads QEMU set on the tap,
// and explain every offload that is off: HOST_ECN is turned off on the
// device, and QEMU 7.2 has no USO.
func TestHostDiagnoseRealQEMU(t *testing.T) {
	testenv.Host(t)
	k, err := vm.LookupKernel("6.12")
	if err != nil {
		t.Fatal(err)
	}
	cache, err := vm.DefaultCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	img, err := vm.Prepare(ctx, cache, k, os.Stderr)
	if err != nil {
		t.Fatalf("the 6.12 image (make vm-prepare): %v", err)
	}
	tap, err := macvtap.CreateTap(macvtap.TapConfig{Name: "nctldiag0", VnetHdr: true, Persistent: true})
	if err != nil {
		t.Fatal(err)
	}
	tap.Close() // QEMU attaches by name; the tap goes with the test's namespace
	testenv.LinkUp(t, "nctldiag0")

	dir := t.TempDir()
	share := filepath.Join(dir, "share")
	os.Mkdir(share, 0o777)
	sock := filepath.Join(dir, "qmp.sock")
	var console bytes.Buffer
	type result struct {
		res *vm.Result
		err error
	}
	done := make(chan result, 1)
	testenv.Go(t, func() { // QEMU's tap netdev must be the test's tap, in the test's namespace
		res, err := img.Run(ctx, vm.RunOptions{
			Script: `netctl-modprobe virtio_net || exit 3
ip link set eth0 up || exit 4
cat /sys/class/net/eth0/device/features > /share/features.tmp && mv /share/features.tmp /share/features
i=0; while [ ! -f /share/done ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done
[ -f /share/done ]`,
			Shares:  []vm.Share{{HostPath: share, GuestPath: "/share"}},
			Timeout: 3 * time.Minute,
			Stdout:  &console,
			QEMUArgs: []string{
				"-netdev", "tap,id=n0,ifname=nctldiag0,script=no,downscript=no,vhost=off",
				"-device", "virtio-net-pci,netdev=n0,id=nic0,host_ecn=off",
				"-qmp", "unix:" + sock + ",server=on,wait=off",
			},
		})
		done <- result{res, err}
	})
	finish := func() {
		os.WriteFile(filepath.Join(share, "done"), nil, 0o644)
		r := <-done
		if r.err != nil || r.res.ExitCode != 0 {
			t.Errorf("guest: %+v, %v\n%s", r.res, r.err, console.String())
		}
	}
	var guestWord uint64
	for {
		b, err := os.ReadFile(filepath.Join(share, "features"))
		if err == nil {
			for i, c := range strings.TrimSpace(string(b)) {
				if c == '1' {
					guestWord |= 1 << i
				}
			}
			break
		}
		select {
		case r := <-done:
			t.Fatalf("the guest ended before its NIC came up: %+v, %v\n%s", r.res, r.err, console.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	defer finish()

	snap := filepath.Join(dir, "snap.json")
	t.Setenv("TMPDIR", t.TempDir()) // a TMPDIR of its own: /tmp is shared with other processes
	before := hostState(t, "nctldiag0")
	out := run(t, "diagnose", "--qmp", sock, "--json", "--save", snap)
	// diagnose (with its host probe) changes nothing here: the same links,
	// the tap's offloads as QEMU set them, no file left in TMPDIR, the same
	// mounts. The probe's scratch devices lived in a namespace of its own.
	if after := hostState(t, "nctldiag0"); after != before {
		t.Errorf("netctl diagnose changed the host:\nbefore: %s\nafter:  %s", before, after)
	}
	var r diagnose.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("diagnose --json: %v\n%s", err, out)
	}
	if r.Kernel == "" {
		t.Errorf("the report names no host kernel: the host probe did not run, so the check above proved nothing about it")
	}
	if want := "0x" + strconv.FormatUint(guestWord, 16); r.Guest.Hex != want {
		t.Errorf("diagnose says the guest acknowledged %s %v; the guest's driver says %s", r.Guest.Hex, r.Guest.Names, want)
	}
	if strings.Join(r.Status, " ") != "ACKNOWLEDGE DRIVER FEATURES_OK DRIVER_OK" || r.NIC != "nic0" ||
		!strings.HasPrefix(r.Backend, "tap nctldiag0, 1 queue(s), vhost=off") || !strings.HasPrefix(r.Header, "12 bytes, as the negotiated") {
		t.Errorf("report head: nic %q status %v backend %q header %q", r.NIC, r.Status, r.Backend, r.Header)
	}
	rows := map[string]diagnose.Row{}
	for _, x := range r.Features {
		rows[x.Feature] = x
		if x.Acked != (guestWord&(1<<x.Bit) != 0) {
			t.Errorf("%s: acked=%v, the guest's driver disagrees", x.Feature, x.Acked)
		}
	}
	// The guest receives checksum-offloaded TSO: QEMU set those on the tap,
	// and netctl read them back from the tap.
	for _, f := range []string{"GUEST_CSUM", "GUEST_TSO4", "GUEST_TSO6", "GUEST_ECN", "CSUM", "HOST_TSO4", "HOST_TSO6"} {
		if x := rows[f]; x.Verdict != "on" || x.Backend != "yes" {
			t.Errorf("%s: %+v, want on and honoured by the tap", f, x)
		}
	}
	want := map[string]string{
		"HOST_ECN":   "set off on QEMU's command line (-device virtio-net-pci,...,host_ecn=off)",
		"GUEST_USO4": "QEMU 7.2",
		"GUEST_USO6": "QEMU 7.2",
		"HOST_USO":   "QEMU 7.2",
	}
	for f, why := range want {
		if x := rows[f]; x.Verdict != "off" || !strings.Contains(x.Reason, why) {
			t.Errorf("%s: %+v, want off because %q", f, x, why)
		}
	}
	offloads := []string{"CSUM", "GUEST_CSUM", "GUEST_TSO4", "GUEST_TSO6", "GUEST_ECN", "GUEST_UFO", "HOST_TSO4",
		"HOST_TSO6", "HOST_ECN", "HOST_UFO", "GUEST_USO4", "GUEST_USO6", "HOST_USO"}
	for _, f := range offloads {
		x, ok := rows[f]
		if !ok {
			t.Errorf("no row for %s", f)
			continue
		}
		if x.Verdict == "off" && !containsLine(r.Off, x.Feature+" off: "+x.Reason) {
			t.Errorf("%s is off but not explained in offloads_off %v", f, r.Off)
		}
	}
	if len(r.Off) != 4 {
		t.Errorf("offloads off: %v, want HOST_ECN and the three USO bits", r.Off)
	}
	// From the machine's namespace (QEMU in a pod, netctl on the host):
	// the tap is read in QEMU's namespace all the same.
	outside := make(chan *diagnose.Snapshot, 1)
	go func() {
		q, err := qmp.Dial(ctx, sock)
		if err != nil {
			t.Error(err)
			outside <- nil
			return
		}
		defer q.Close()
		s, err := gather.Gather(ctx, q, gather.Options{})
		if err != nil {
			t.Error(err)
		}
		outside <- s
	}()
	if s := <-outside; s == nil || s.Tap == nil || strings.Join(s.Tap.Offloads, " ") != "csum tso4 tso6 tso_ecn" || len(s.Errors) > 0 {
		t.Errorf("diagnose from the machine's namespace: %+v", s)
	}
	// Offline: the saved snapshot explains the same way.
	if again := run(t, "diagnose", "--from", snap, "--json"); again != out {
		t.Errorf("--from the saved snapshot differs:\n%s\n%s", again, out)
	}
	// libvirt's way: a bare reply saved with virsh qemu-monitor-command,
	// and the tap named.
	saved, err := diagnose.Load(snap)
	if err != nil {
		t.Fatal(err)
	}
	// What the NIC's type offers by default (device-list-properties) and
	// what its -device option set, read from the real QEMU.
	if saved.Driver != "virtio-net-pci" || !saved.Defaults["queue_reset"] || !saved.Defaults["host_ecn"] || saved.Defaults["mq"] ||
		len(saved.Cmdline) != 1 || saved.Cmdline["host_ecn"] != "off" {
		t.Errorf("snapshot: driver %q, defaults %v, command line %v", saved.Driver, saved.Defaults, saved.Cmdline)
	}
	if x := rows["HOST_ECN"]; x.Layer != "cmdline" {
		t.Errorf("HOST_ECN: %+v, want layer cmdline", x)
	}
	raw := filepath.Join(dir, "virsh.json")
	os.WriteFile(raw, []byte(`{"return":`+string(saved.Status)+`,"id":"libvirt-42"}`), 0o644)
	var bare diagnose.Report
	if err := json.Unmarshal([]byte(run(t, "diagnose", "--from", raw, "--tap", "nctldiag0", "--id", "net0", "--json")), &bare); err != nil {
		t.Fatal(err)
	}
	if bare.Guest.Hex != r.Guest.Hex || bare.NIC != "net0" || !strings.HasPrefix(bare.Backend, "tap nctldiag0") {
		t.Errorf("from a bare reply: %+v", bare)
	}
	for _, x := range bare.Features {
		if x.Feature == "GUEST_TSO4" && (x.Verdict != "on" || x.Backend != "yes") {
			t.Errorf("from a bare reply: %+v", x)
		}
		if x.Feature == "HOST_USO" && !strings.Contains(x.Reason, "older than 8.2") {
			t.Errorf("from a bare reply: %+v", x)
		}
	}
	table := run(t, "diagnose", "--from", snap)
	if !strings.Contains(table, "HOST_ECN off: set off on QEMU's command line (-device virtio-net-pci,...,host_ecn=off)") {
		t.Errorf("table:\n%s", table)
	}
	t.Logf("netctl diagnose:\n%s", table)
}

func containsLine(lines []string, l string) bool {
	for _, x := range lines {
		if x == l {
			return true
		}
	}
	return false
}

// hostState is what netctl diagnose must leave as it found it: the links
// of this network namespace, the ethtool features of tap, the entries of
// TMPDIR and the mount table.
func hostState(t *testing.T, tap string) string {
	t.Helper()
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range links {
		names = append(names, l.Attrs().Name)
	}
	f, err := macvtap.ReadFeatures(tap)
	if err != nil {
		t.Fatal(err)
	}
	tmp, err := os.ReadDir(os.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range tmp {
		files = append(files, e.Name())
	}
	// thread-self: the test's locked thread has the mount namespace
	// testenv.Host made; /proc/self is the main thread's, the machine's,
	// where anything else running may mount.
	mounts, err := os.ReadFile("/proc/thread-self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("links %v; %s features %v; %s holds %v; %d bytes of mountinfo %x", names, tap, f.On(), os.TempDir(), files,
		len(mounts), sha256.Sum256(mounts))
}
