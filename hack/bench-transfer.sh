#!/usr/bin/env bash
# Transfer throughput against curl on the same datastore URL, and the
# transfer command's peak RSS, on a 2 GiB disk served by vcsim on 127.0.0.1.
#
# hack/benchsim starts the simulator and lays the disk out as ESXi does
# (descriptor + flat extent); the disk, the copy and everything else live in
# one temporary directory, removed on exit. Each tool runs ROUNDS times,
# alternating, and the best run of each counts (the machine is shared).
# The transfer's time is the command's wall clock: login, descriptor, copy,
# SHA-256 and the final fsync of the image included. Each run also reports
# the CPU seconds the client and the simulator spent: on a small machine
# both tools are CPU-bound, and the transfer does more work per byte (it
# hashes and writes what curl throws away).
#
# Environment: SIZE_MIB (default 2048), ROUNDS (default 3), XFER_FLAGS (extra
# flags for vm-transfer, for example "--chunk-mib 8 --buffers 3").
set -euo pipefail

cd "$(dirname "$0")/.."
SIZE_MIB=${SIZE_MIB:-2048}
ROUNDS=${ROUNDS:-3}
XFER_FLAGS=${XFER_FLAGS:-}

for tool in curl /usr/bin/time; do
	command -v "$tool" >/dev/null || { echo "bench-transfer: $tool is missing (apt-get install -y curl time)" >&2; exit 1; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/bench-transfer.XXXXXX")
sim_pid=
cleanup() {
	if [ -n "$sim_pid" ]; then
		kill "$sim_pid" 2>/dev/null || true
		wait "$sim_pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

echo "building vm-transfer and benchsim..."
go build -o "$work/bin/vm-transfer" ./cmd/vm-transfer
go build -o "$work/bin/benchsim" ./hack/benchsim

echo "starting vcsim with a ${SIZE_MIB} MiB disk in $work..."
"$work/bin/benchsim" --work-dir "$work" --size-mib "$SIZE_MIB" >"$work/env" 2>"$work/sim.log" &
sim_pid=$!
for _ in $(seq 600); do
	grep -q '^READY=1' "$work/env" 2>/dev/null && break
	kill -0 "$sim_pid" 2>/dev/null || { cat "$work/sim.log" >&2; exit 1; }
	sleep 0.2
done
grep -q '^READY=1' "$work/env" || { echo "bench-transfer: vcsim did not start" >&2; exit 1; }
# shellcheck disable=SC1091
source "$work/env"

now() { date +%s.%N; }
mibps() { awk -v b="$1" -v s="$2" 'BEGIN { printf "%.1f", b / s / 1048576 }'; }

# CPU seconds (user + system) a process used so far, from /proc.
proc_cpu() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$1/stat"; }
# CPU seconds of a finished command, from /usr/bin/time -f '%U %S'.
time_cpu() { awk '{ printf "%.2f", $1 + $2 }' "$1"; }
sub() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a - b }'; }

best_curl=0 best_xfer=0 rss_kib=0
for round in $(seq "$ROUNDS"); do
	s0=$(proc_cpu "$sim_pid")
	t0=$(now)
	got=$(/usr/bin/time -f '%U %S' -o "$work/curl-time.txt" curl -sS -k -o /dev/null -b "$COOKIE" -w '%{size_download}' "$FLAT_URL")
	t1=$(now)
	s1=$(proc_cpu "$sim_pid")
	[ "$got" = "$SIZE" ] || { echo "bench-transfer: curl got $got bytes of $SIZE" >&2; exit 1; }
	curl_rate=$(mibps "$SIZE" "$(sub "$t1" "$t0")")
	curl_cpu=$(time_cpu "$work/curl-time.txt")
	curl_srv=$(sub "$s1" "$s0")

	rm -f "$IMAGE"
	s0=$(proc_cpu "$sim_pid")
	t0=$(now)
	# shellcheck disable=SC2086
	/usr/bin/time -f '%U %S %M' -o "$work/time.txt" "$work/bin/vm-transfer" --spec "$SPEC" --credentials-dir "$CREDS" \
		--termination-log "$work/result.json" --progress-interval 2s $XFER_FLAGS >"$work/out.jsonl"
	t1=$(now)
	s1=$(proc_cpu "$sim_pid")
	xfer_rate=$(mibps "$SIZE" "$(sub "$t1" "$t0")")
	xfer_cpu=$(time_cpu "$work/time.txt")
	xfer_srv=$(sub "$s1" "$s0")
	rss=$(awk '{ print $3 }' "$work/time.txt")
	echo "round $round: curl $curl_rate MiB/s (client ${curl_cpu} CPU-s, server ${curl_srv}), vm-transfer $xfer_rate MiB/s (client ${xfer_cpu} CPU-s, server ${xfer_srv}; peak RSS $((rss / 1024)) MiB)"
	best_curl=$(awk -v a="$best_curl" -v b="$curl_rate" 'BEGIN { print (b > a) ? b : a }')
	best_xfer=$(awk -v a="$best_xfer" -v b="$xfer_rate" 'BEGIN { print (b > a) ? b : a }')
	[ "$rss" -gt "$rss_kib" ] && rss_kib=$rss
done
echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg); client and server share them"

# The result's checksum must be the image's.
want=$(sed -n 's/.*"sha256":"\([0-9a-f]*\)".*/\1/p' "$work/result.json")
got=$(sha256sum "$IMAGE" | cut -d' ' -f1)
[ -n "$want" ] && [ "$want" = "$got" ] || { echo "bench-transfer: checksum mismatch: result $want, image $got" >&2; exit 1; }
size=$(stat -c %s "$IMAGE")
alloc=$(( $(stat -c %b "$IMAGE") * $(stat -c %B "$IMAGE") ))
echo "image: $size bytes, $alloc allocated, sha256 $got (matches the result)"
echo "best of $ROUNDS: curl $best_curl MiB/s, vm-transfer $best_xfer MiB/s"
ratio=$(awk -v a="$best_xfer" -v b="$best_curl" 'BEGIN { printf "%.2f", a / b }')
echo "transfer/curl throughput ratio: $ratio, peak RSS: $((rss_kib / 1024)) MiB"
