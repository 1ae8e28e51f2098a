#!/bin/bash
# run-vm-tests.sh KERNELS PKG...   (KERNELS: all, 6.12, 6.1 or "6.12,6.1")
# Runs the TestVM* tests of each package in the test VM, one VM boot per
# package and kernel. Two VMs run at once: with two kernels, one each
# (go test -p 1 per kernel, both kernels side by side); with one kernel,
# two packages at a time. Each kernel's output is printed whole, in turn.
set -u
VMEXEC=${VMEXEC:?path of the netctl-vm binary}
kernels=$1; shift
[ "$kernels" = all ] && kernels="6.12 6.1"
kernels=${kernels//,/ }
set -- "$@"
n=$(wc -w <<<"$kernels")
p=2; [ "$n" -gt 1 ] && p=1
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
for k in $kernels; do
  (
    t0=$(date +%s)
    NETCTL_VM_KERNEL=$k CGO_ENABLED=0 go test -count=1 -p "$p" -exec "$VMEXEC exec" -run '^TestVM' -v "$@" >"$logs/$k.log" 2>&1
    echo $? >"$logs/$k.rc"
    echo $(( $(date +%s) - t0 )) >"$logs/$k.time"
  ) &
done
wait
rc=0
for k in $kernels; do
  echo "=== VM layer, kernel $k ($(cat "$logs/$k.time")s)"
  cat "$logs/$k.log"
  r=$(cat "$logs/$k.rc")
  if [ "$r" != 0 ]; then echo "=== VM layer, kernel $k: FAILED (go test exit $r)"; rc=1; fi
done
exit $rc
