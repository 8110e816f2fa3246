#!/usr/bin/env bash
# The outage of a migration against the size of its disk: for each size in
# SIZE (GiB, default "2 8"), one VM of one disk of that many GiB of
# pseudo-random bytes migrated through the real node, the real CDI and
# local-path-provisioner, with the simulated conversion (the e2e suite's
# stack: test/e2e/downtime_bench_test.go). Prints per size
#
#   downtime: size=<GiB> transfer=<s> conversion=<s> other=<s> total=<s> written=<x> read=<x> status=<s>
#
# transfer, conversion and other split the outage (the source seen off to
# the target seen running) at the checkpoints the benchmark's watch saw;
# status is the controller's own status.downtime.seconds; written and read
# are the bytes the device under the node's volumes wrote and read during
# the outage per byte of the disk (re-reads the page cache serves are not
# in read). Then, for two sizes or more, how "other" grows against
# "transfer" between the smallest and the largest.
#
# Needs root (the node) and the upstream builds make test-e2e uses; the
# Makefile's bench-downtime target names them and sets their folders. The
# log of the run is in _output/bench-downtime.log.
set -euo pipefail

cd "$(dirname "$0")/.."
SIZE=${SIZE:-2 8}
log=_output/bench-downtime.log
mkdir -p _output
echo "bench-downtime: SIZE=\"$SIZE\" GiB (log: $log)" >&2
status=0
BENCH_DOWNTIME_GIB=$SIZE go test -count=1 -tags e2e -timeout 90m -v -run '^TestBenchDowntime$' ./test/e2e/ >"$log" 2>&1 || status=$?
lines=$(grep '^downtime: ' "$log" || true)
if [ "$status" -ne 0 ] || [ -z "$lines" ]; then
	grep -E -- '--- FAIL|Error:|Messages:|^e2e: ' "$log" | tail -n 30 >&2 || true
	echo "bench-downtime: the benchmark failed (exit $status); see $log" >&2
	exit 1
fi
echo "$lines"
# other(largest) - other(smallest) against transfer(largest) - transfer(smallest).
echo "$lines" | awk '
	{ for (i = 2; i <= NF; i++) { split($i, kv, "="); v[NR, kv[1]] = kv[2] } n = NR }
	END {
		if (n < 2) exit
		lo = 1; hi = 1
		for (r = 2; r <= n; r++) { if (v[r, "size"] < v[lo, "size"]) lo = r; if (v[r, "size"] > v[hi, "size"]) hi = r }
		dt = v[hi, "transfer"] - v[lo, "transfer"]; dother = v[hi, "other"] - v[lo, "other"]
		printf "downtime growth: size %s->%s GiB: transfer +%.1fs other %+.1fs (%.0f%% of the transfer growth; the aim is at most 10%%)\n", v[lo, "size"], v[hi, "size"], dt, dother, (dt > 0 ? 100 * dother / dt : 0)
	}'
