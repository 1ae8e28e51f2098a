#!/bin/bash
# make bench: runs the vhost-net benchmarks in the 6.12 VM and appends their
# JSON lines to bench/results.jsonl (one line per benchmark, with the commit),
# so runs can be compared across commits. Throughput runs on 2 vCPUs (the
# vhost worker and the driver each get one); setup runs on 1 vCPU, because on
# 2 vCPUs repeated setup/teardown of vhost-net devices hits ENOMEM from
# VHOST_SET_OWNER on this kernel (see README).
set -euo pipefail
BIN=${BIN:?}
VMEXEC=${VMEXEC:?}
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet 2>/dev/null || commit="$commit+dirty"
mkdir -p bench
out=$(mktemp)
trap 'rm -f "$out"' EXIT
run() {
  "$VMEXEC" run -kernel 6.12 -timeout 15m "$@" | tee -a "$out"
}
run -smp 2 -mem 2048 -- "/host$BIN/vhostnet-bench" -commit "$commit" -only tx,rx,rxtcp,txtcp
run -smp 1 -mem 2048 -- "/host$BIN/vhostnet-bench" -commit "$commit" -only setup,scale -c "/host$BIN/setup-c"
grep '^{' "$out" >> bench/results.jsonl
echo "bench: $(grep -c '^{' "$out") results appended to bench/results.jsonl"
