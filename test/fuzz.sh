#!/bin/bash
# fuzz.sh [FUZZTIME]: runs every fuzz target in the module (each func
# FuzzXxx in a *_test.go file, found by grep) for FUZZTIME (default 30s),
# one at a time, and fails if any target fails or did not fuzz at all
# (go test passes a -fuzz pattern that matches no target, saying only
# "no fuzz tests to fuzz"). A failing input is saved by go test under the
# package's testdata/fuzz/FuzzXxx/; fix the bug and commit that file as a
# seed.
#
# fuzz.sh --list prints the targets it would run ("dir FuzzXxx" lines);
# internal/srcscan's TestFuzzScriptFindsEveryTarget checks that list
# against the Go parser's view of the module.
#
# Minimising a new interesting input may take at most FUZZMINIMIZETIME
# (default 5s): go test's default of 60s lets one minimisation of a large
# seed (the QMP transcript) eat a whole 30s run while it reports 0 execs/s.
set -u
fuzztime=${1:-30s}
minimize=${FUZZMINIMIZETIME:-5s}
cd "$(dirname "$0")/.."
mapfile -t targets < <(grep -rHo --include='*_test.go' --exclude-dir=.cache --exclude-dir=testdata --exclude-dir=bin \
  -E '^func Fuzz([A-Z0-9_][A-Za-z0-9_]*)?\(' . | sed -E 's|^\./(.*/)?[^/]*:func (Fuzz[A-Za-z0-9_]*)\(|\1 \2|; s|^/? |. |; s|/ | |' | sort -u)
if [ "$fuzztime" = --list ]; then
  printf '%s\n' "${targets[@]}"
  exit 0
fi
if [ ${#targets[@]} -eq 0 ]; then
  echo "fuzz: no fuzz targets found" >&2
  exit 1
fi
echo "fuzz: ${#targets[@]} targets, $fuzztime each"
failed=()
for t in "${targets[@]}"; do
  read -r dir name <<<"$t"
  echo "=== fuzz $name (./$dir)"
  log=$(mktemp)
  go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" -fuzzminimizetime "$minimize" "./$dir" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  if [ "$rc" != 0 ]; then
    failed+=("$name (./$dir)")
  elif ! grep -q '^fuzz: elapsed' "$log"; then
    echo "fuzz: $name (./$dir) did not fuzz (no 'fuzz: elapsed' line)" >&2
    failed+=("$name (./$dir): did not fuzz")
  fi
  rm -f "$log"
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]}" >&2
  echo "fuzz: the failing inputs are under each package's testdata/fuzz/; fix the bug, then commit them as seeds" >&2
  exit 1
fi
echo "fuzz: all ${#targets[@]} targets ran $fuzztime without a failure"
