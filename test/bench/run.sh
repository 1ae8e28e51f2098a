#!/bin/bash
# make bench: runs the benchmarks and appends their JSON lines to
# bench/results.jsonl (one line per benchmark, with the commit), so runs
# can be compared across commits. BENCH selects: all (default), startup,
# vhostnet, attach, stats, vhostuser, libvirt or migrate.
#   startup: startup-bench (test/bench/startup) on this host: package
#     initialisation (GODEBUG=inittrace=1) of netctl version and of a hook
#     call with nothing to do, split netctl against netctl-full, and that
#     hook call's wall and CPU time against a static C no-op.
#   vhostnet: vhostnet-bench in one 6.12 VM with 2 vCPUs (the vhost worker
#     and the driver each get one); every figure the median of 5
#     interleaved rounds, with min and max (schema 2, see
#     test/bench/vhostnet/main.go).
#   attach: attach-bench (test/bench/attach): attach latency on this host
#     (QEMU's userspace path), then in one 6.12 VM attach latency on the
#     vhost-net path and a nested guest's TCP streams; then in another 6.12
#     VM the two seeds with two nested guests (nested KVM, or TCG when that
#     fails) on netctl vhost-net NICs bridged in the VM (-only seeds):
#     guest-to-guest TCP with offloads on vs off (netmap seed, 4.3x) and
#     1-byte TCP request/response on --profile latency (busy-poll) vs
#     --profile throughput NICs (TX-thread seed, 1.93x), each beside the
#     CPU both guests' QEMUs (vhost workers included) spent per MB or per
#     1000 transactions.
#   stats: stats-bench (test/bench/stats) on this host: one netctl exporter
#     scrape with 1, 16 and 64 NICs (per NIC), and netctl stats --watch's
#     CPU at a 1 s interval, 5 interleaved 10 s runs per side (16 NICs
#     vs 1 on paused QEMUs; 1 NIC of a booted guest carrying a ping flood
#     vs 1 of a paused QEMU); then statsvhost-bench (test/bench/statsvhost)
#     in the 6.1 VM: one collection's vhost workers (kernel threads there,
#     found by a /proc scan) with 1, 16 and 64 vhost-net VMs, per VM.
#   libvirt: on this host, a private libvirtd's running domain (QEMU's
#     userspace path): netctl attach/detach --vm DOMAIN against virsh
#     attach-device/detach-device of the same kind of interface on a tap
#     made beforehand, 7 interleaved rounds (BenchmarkLibvirtAttach in
#     test/libvirtd, run as a Go benchmark: it needs the private daemon).
#   migrate: migrate-bench (test/bench/migrate) in one 6.12 VM with 2
#     vCPUs: one nested guest migrated 10 times over a unix socket, its
#     NIC on the destination alternately netctl's (netctl migrate
#     incoming) and QEMU's own tap,vhost=on: QEMU's downtime and the
#     blackout a 10 ms ping sees.
#   vhostuser: vhostuser-bench (test/bench/vhostuser) in one 6.12 VM with
#     2 vCPUs: the vhost-user bridge's data path against direct vhost-net
#     with the same driver, a firmware QEMU's first DHCP packet through
#     the bridge against QEMU's own tap,vhost=on, and a nested Linux
#     guest's TCP streams on a vhost-user NIC against QEMU's own vhost-net
#     NIC (one guest boot).
set -euo pipefail
BIN=${BIN:?}
VMEXEC=${VMEXEC:?}
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet 2>/dev/null || commit="$commit+dirty"
mkdir -p bench
t0=$(date +%s)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
run() {
  "$VMEXEC" run -kernel 6.12 -timeout 15m "$@" | tee -a "$out"
}
BENCH=${BENCH:-all}
case "$BENCH" in all|startup|vhostnet|attach|stats|vhostuser|libvirt|migrate) ;; *) echo "bench: BENCH=$BENCH: use all, startup, vhostnet, attach, stats, vhostuser, libvirt or migrate" >&2; exit 2;; esac
if [ "$BENCH" = all ] || [ "$BENCH" = startup ]; then
  "$BIN/startup-bench" -netctl "$BIN/netctl" -full "$BIN/netctl-full" -noop "$BIN/noop-c" -go-noop "$BIN/noop-go" -commit "$commit" \
    -host-load "$(cat /proc/loadavg)" | tee -a "$out"
fi
if [ "$BENCH" = all ] || [ "$BENCH" = vhostnet ]; then
run -smp 2 -mem 2048 -- "/host$BIN/vhostnet-bench" -commit "$commit" -c "/host$BIN/setup-c" -vdpa-c "/host$BIN/vdpa-setup-c" -rounds 5 \
  -host-load "$(cat /proc/loadavg)" \
  -only tx,rx,rxtcp,txtcp,uso,backends,zerocopy,setup,scale,iotlb,vdpasetup
fi
if [ "$BENCH" = all ] || [ "$BENCH" = attach ]; then
  # Attach latency on this host (QEMU's userspace path: no vhost-net here),
  # in a network namespace attach-bench makes for itself.
  "$BIN/attach-bench" -netctl "$BIN/netctl" -attach-c "$BIN/attach-c" -commit "$commit" \
    -host-load "$(cat /proc/loadavg)" -only latency | tee -a "$out"
  # In the 6.12 VM: attach latency on the vhost-net path, and a nested
  # Linux guest's TCP streams on a netctl-attached vhost-net NIC and on
  # one QEMU set up itself (one guest boot).
  # The nested guest boots the VM's own kernel (netctl-vm prepare put it here).
  cache=${NETCTL_VM_CACHE:-$PWD/.cache/vm}
  vmlinuz=$(sed -n 's/.*"vmlinuz": *"\([^"]*\)".*/\1/p' "$cache/kernel-6.12/image.json")
  run -smp 2 -mem 2048 -- "/host$BIN/attach-bench" -root /host -netctl "/host$BIN/netctl" \
    -attach-c "/host$BIN/attach-c" -agent "/host$BIN/l2agent" -vmlinuz "/host$vmlinuz" -commit "$commit" \
    -host-load "$(cat /proc/loadavg)" -only latency,datapath
  # The seeds, in a VM of their own: two nested guests, under KVM in the
  # VM when kvm_amd loads. The VM has been seen to reset silently with
  # nested KVM guests (2 of 5 trial runs); the JSON lines come at the end,
  # so a VM that died printed none, and the seeds run again with the
  # nested guests under TCG (no nested SVM, but slower, and in 3 of 4
  # trial runs a TCG guest's kernel crashed at boot). When that fails too
  # the bench says so and goes on without the seed lines.
  seeds() {
    run -smp 2 -mem 2048 -- "/host$BIN/attach-bench" -root /host -netctl "/host$BIN/netctl" \
      -agent "/host$BIN/l2agent" -vmlinuz "/host$vmlinuz" -commit "$commit" \
      -host-load "$(cat /proc/loadavg)" -only seeds "$@"
  }
  if ! seeds; then
    echo "bench: the seeds with nested KVM guests failed (see above); again with the nested guests under TCG" >&2
    seeds -seeds-accel tcg || echo "bench: the seeds failed under TCG too (see above): no seed lines in this run" >&2
  fi
fi
if [ "$BENCH" = all ] || [ "$BENCH" = stats ]; then
  # The exporter's scrape cost and netctl stats --watch's CPU, on this host
  # (QEMU's userspace path), in a network namespace stats-bench makes.
  "$BIN/stats-bench" -netctl "$BIN/netctl" -commit "$commit" -host-load "$(cat /proc/loadavg)" | tee -a "$out"
  # Before Linux 6.4 (Debian 12's 6.1) vhost workers are kernel threads
  # found by a /proc scan: one collection of 1, 16 and 64 vhost-net VMs in
  # the 6.1 VM (issue 20).
  "$VMEXEC" prepare -kernel 6.1
  "$VMEXEC" run -kernel 6.1 -timeout 15m -smp 2 -mem 2048 -- "/host$BIN/statsvhost-bench" -commit "$commit" \
    -host-load "$(cat /proc/loadavg)" | tee -a "$out"
fi
if [ "$BENCH" = all ] || [ "$BENCH" = vhostuser ]; then
  cache=${NETCTL_VM_CACHE:-$PWD/.cache/vm}
  vmlinuz=$(sed -n 's/.*"vmlinuz": *"\([^"]*\)".*/\1/p' "$cache/kernel-6.12/image.json")
  run -smp 2 -mem 2048 -- "/host$BIN/vhostuser-bench" -commit "$commit" -rounds 5 \
    -host-load "$(cat /proc/loadavg)" -only datapath,firstpacket,nested \
    -agent "/host$BIN/l2agent" -vmlinuz "/host$vmlinuz"
fi
if [ "$BENCH" = all ] || [ "$BENCH" = libvirt ]; then
  NETCTL_BENCH=libvirt NETCTL_BENCH_COMMIT="$commit" NETCTL_BENCH_LOAD="$(cat /proc/loadavg)" NETCTL_VM_CACHE=${NETCTL_VM_CACHE:-$PWD/.cache/vm} \
    go test -count=1 -run '^$' -bench '^BenchmarkLibvirtAttach$' -benchtime 1x ./test/libvirtd | tee -a "$out"
fi
if [ "$BENCH" = all ] || [ "$BENCH" = migrate ]; then
  cache=${NETCTL_VM_CACHE:-$PWD/.cache/vm}
  vmlinuz=$(sed -n 's/.*"vmlinuz": *"\([^"]*\)".*/\1/p' "$cache/kernel-6.12/image.json")
  run -smp 2 -mem 2048 -- "/host$BIN/migrate-bench" -commit "$commit" -rounds 5 \
    -host-load "$(cat /proc/loadavg)" -vmlinuz "/host$vmlinuz"
fi
grep '^{' "$out" >> bench/results.jsonl
echo "bench: $(grep -c '^{' "$out") results appended to bench/results.jsonl in $(( $(date +%s) - t0 ))s"
