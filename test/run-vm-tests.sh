#!/bin/bash
# run-vm-tests.sh KERNELS PKG...   (KERNELS: all, 6.12, 6.1 or "6.12,6.1")
# Runs the TestVM* tests of each package in the test VM, one VM boot per
# package and kernel. Two VMs run at once: with two kernels, one each
# (go test -p 1 per kernel, both kernels side by side); with one kernel,
# two packages at a time. Each kernel's output is printed whole, in turn.
#
# go test's JSON goes through testcheck (TESTCHECK, bin/testcheck), which
# fails the run where a VM test reported PASS or SKIP having checked
# nothing: a package none of whose TestVM tests ran, or a TestVM test (or
# subtest) that skipped without a passing without_<capability> subtest,
# testenv.Require's check of what the code does on a kernel lacking it.
set -u -o pipefail
VMEXEC=${VMEXEC:?path of the netctl-vm binary}
TESTCHECK=${TESTCHECK:?path of the testcheck binary (make bin/testcheck)}
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
    NETCTL_VM_KERNEL=$k CGO_ENABLED=0 go test -count=1 -timeout 30m -p "$p" -exec "$VMEXEC exec" -run '^TestVM' -json "$@" 2>&1 |
      "$TESTCHECK" -run '^TestVM' -no-skip '^TestVM' -skip-needs without_ >"$logs/$k.log" 2>&1
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
  if [ "$r" != 0 ]; then echo "=== VM layer, kernel $k: FAILED (go test or testcheck exit $r)"; rc=1; fi
done
exit $rc
