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
  for attempt in 1 2; do
    go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" -fuzzminimizetime "$minimize" "./$dir" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    # Go before 1.27 (go.dev/issue/75804): the coordinator can report its
    # own -fuzztime deadline as "context deadline exceeded", a failure
    # with no failing input, on a loaded machine. Run such a target once
    # more; a real failure writes its input and is not retried.
    if [ "$rc" != 0 ] && [ "$attempt" = 1 ] && grep -q '^    context deadline exceeded$' "$log" && ! grep -q 'Failing input written' "$log"; then
      echo "fuzz: $name: 'context deadline exceeded' with no failing input (go.dev/issue/75804): once more"
      continue
    fi
    break
  done
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
