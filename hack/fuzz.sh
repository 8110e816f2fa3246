#!/usr/bin/env bash
# Runs every Go native fuzz target of the module (every func FuzzXxx(f
# *testing.F) in a _test.go file without a build constraint, found anew on
# each run) for a fixed budget each: FUZZTIME (default 10s; a fuzz budget,
# not a timing assertion). Prints one line per target with its executions,
# then a summary; fails if any target fails. A crasher Go finds is written
# to <package>/testdata/fuzz/<target>/: keep it as a regular test of the
# package, beside the fix.
#
# go test -fuzz takes one target of one package per run and links the
# package's instrumented test binary each time; this script links it once
# per package (go test -c -fuzz) and runs it per target as go test does
# (-test.fuzzcachedir is where go test keeps the package's corpus).
#
# Go before 1.27 may fail a target at the end of its budget with a bare
# "context deadline exceeded" (golang/go#75804, a race in its fuzzing
# coordinator, no input written): such a run is counted as a deadline race
# and passes when the target's seed corpus passes again.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-10s}

module=$($GO list -m)
cachedir=$($GO env GOCACHE)/fuzz
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# targets: "<package dir> <target>" lines, in a stable order.
targets() {
  git ls-files --cached --others --exclude-standard -- '*_test.go' | sort | while read -r file; do
    [ -f "$file" ] || continue
    grep -q '^//go:build' "$file" && continue
    sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(f \*testing\.F).*/\1/p' "$file" | while read -r name; do
      echo "$(dirname "$file") $name"
    done
  done
}

# files counts the files in a folder (0 when there is none).
files() {
  if [ -d "$1" ]; then ls "$1" | wc -l; else echo 0; fi
}

mapfile -t all < <(targets)
if [ ${#all[@]} -eq 0 ]; then
  echo "fuzz: no fuzz targets found" >&2
  exit 1
fi

start=$SECONDS
total_execs=0 failed=0 races=0 ran=0 building=0
failures=()
declare -A built=()
for entry in "${all[@]}"; do
  dir=${entry% *} name=${entry#* }
  bin=$tmp/$(echo "$dir" | tr / _).test
  if [ -z "${built[$dir]:-}" ]; then
    b0=$SECONDS
    rc=0
    $GO test -c -fuzz=. -o "$bin" "./$dir" >"$tmp/build.log" 2>&1 || rc=$?
    building=$((building + SECONDS - b0))
    if [ "$rc" -ne 0 ]; then
      echo "fuzz: $dir: building its fuzz test binary failed:" >&2
      cat "$tmp/build.log" >&2
      failed=$((failed + 1)) failures+=("$dir (build)")
      built[$dir]=failed
      continue
    fi
    built[$dir]=ok
  fi
  [ "${built[$dir]}" = ok ] || continue

  log=$tmp/$(echo "$dir" | tr / _)_$name.log
  crashers=$dir/testdata/fuzz/$name
  before=$(files "$crashers")
  t0=$SECONDS
  rc=0
  (cd "$dir" && "$bin" -test.run='^$' -test.fuzz="^${name}\$" -test.fuzztime="$FUZZTIME" -test.timeout=10m \
    -test.fuzzcachedir="$cachedir/$module/$dir" -test.paniconexit0) >"$log" 2>&1 || rc=$?
  took=$((SECONDS - t0))
  execs=$(grep -o 'execs: [0-9]*' "$log" | tail -n 1 | awk '{print $2}' || true)
  execs=${execs:-0}
  interesting=$(grep -o 'new interesting: [0-9]*' "$log" | tail -n 1 | awk '{print $3}' || true)
  total_execs=$((total_execs + execs)) ran=$((ran + 1))
  after=$(files "$crashers")

  status=ok
  if [ "$rc" -ne 0 ]; then
    if [ "$after" -eq "$before" ] && ! grep -q 'Failing input written' "$log" &&
      [ "$(grep -c -v -e '^fuzz: ' -e '^--- FAIL: ' -e '^FAIL$' -e '^exit status' -e '^\s*context deadline exceeded$' -e '^$' "$log" || true)" -eq 0 ] &&
      grep -q 'context deadline exceeded' "$log" &&
      (cd "$dir" && "$bin" -test.run="^${name}\$" >"$log.seeds" 2>&1); then
      status="ok (deadline race at the end of the budget, golang/go#75804; seed corpus passes)"
      races=$((races + 1))
    else
      status=FAILED
      failed=$((failed + 1)) failures+=("$dir $name")
    fi
  fi
  printf 'fuzz: %-28s %-24s %9d execs in %3ds, %s new interesting: %s\n' "$dir" "$name" "$execs" "$took" "${interesting:-0}" "$status"
  if [ "$status" = FAILED ]; then
    sed 's/^/    /' "$log" | tail -n 40
    if [ "$after" -gt "$before" ]; then
      echo "    crasher written to $crashers/ (go test -run '$name/<file>' ./$dir reproduces it): keep it as a regular test beside the fix"
    fi
  fi
done

elapsed=$((SECONDS - start))
printf 'fuzz: %d targets, %d execs in all, %d failed, %d deadline races passed, FUZZTIME=%s, %dm%02ds (%ds of it building %d test binaries)\n' \
  "$ran" "$total_execs" "$failed" "$races" "$FUZZTIME" $((elapsed / 60)) $((elapsed % 60)) "$building" "${#built[@]}"
if [ "$failed" -gt 0 ]; then
  printf 'fuzz: failed: %s\n' "${failures[@]}"
  exit 1
fi
