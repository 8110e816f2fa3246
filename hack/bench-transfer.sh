#!/usr/bin/env bash
# Transfer throughput and client CPU against standard tools doing the same
# work, on one disk served by vcsim on 127.0.0.1; then throughput over 1, 2,
# 4 and 8 streams when the simulator caps each connection's rate.
#
# hack/benchsim starts the simulator and lays the disk out as ESXi does
# (descriptor + flat extent); the disk, the copies and everything else live
# in one temporary directory (one file system), removed on exit. Each round
# runs, one after the other on the same flat-extent URL:
#   (a) curl -o /dev/null                          the wire alone
#   (b) curl -o FILE                               the wire and a write
#   (d) curl -o FILE && sync FILE                  the wire and a durable write (vm-transfer fsyncs)
#   (c) curl | tee FILE | openssl dgst -sha256     the same work as vm-transfer
#   vm-transfer                                    login, descriptor, copy, SHA-256, fsync
# and openssl dgst -sha256 over the copy (b) wrote, for the hashing CPU.
# Before each of them the page cache is written back (sync, not timed), so
# that no tool's writes are still going to the disk while the next runs.
# Throughput is the best of ROUNDS; CPU seconds (user + system of the client
# processes, from /usr/bin/time) per GiB are the lowest of ROUNDS, the same
# rule for every tool; the spread of both is printed. The ideal CPU per GiB
# is (a)'s plus openssl's hashing. The image's SHA-256 is checked against
# sha256sum and the digest (c) printed.
#
#
# Then a thin disk (THIN_SIZE_MIB, about THIN_PERCENT written in scattered
# runs, changed block tracking on: the simulator answers
# QueryChangedDiskAreas) is copied whole (fullCopy) and allocated-only, one
# after the other, ROUNDS times; the line
#   allocated-only: capacity=<bytes> allocated=<bytes> read=<bytes> full=<s>s areas=<s>s speedup=<x>
# gives the best wall time of each (login, plan, map, copy, SHA-256,
# fsync); read must be at most allocated plus one chunk per stream, and
# both copies' SHA-256 the source disk's.
#
# Environment: SIZE_MIB (2048), ROUNDS (3), XFER_FLAGS (extra vm-transfer
# flags), CAP_MIB (25: the per-connection cap in MiB/s of the streams table;
# 0 skips it), CAP_SIZE_MIB (512), CAP_STREAMS ("1 2 4 8"), CAP_FLAGS
# ("--chunk-mib 2": 8 streams then hold 17 MiB of pieces), THIN_SIZE_MIB
# (2048; 0 skips the thin round), THIN_PERCENT (25), THIN_FLAGS
# ("--streams 2"), THIN_CAP_MIB (0: the thin round's per-connection cap in
# MiB/s, to stand for a network slower than the loopback).
set -euo pipefail

cd "$(dirname "$0")/.."
SIZE_MIB=${SIZE_MIB:-2048}
ROUNDS=${ROUNDS:-3}
XFER_FLAGS=${XFER_FLAGS:-}
CAP_MIB=${CAP_MIB:-25}
CAP_SIZE_MIB=${CAP_SIZE_MIB:-512}
CAP_STREAMS=${CAP_STREAMS:-1 2 4 8}
CAP_FLAGS=${CAP_FLAGS:---chunk-mib 2}
THIN_SIZE_MIB=${THIN_SIZE_MIB:-2048}
THIN_PERCENT=${THIN_PERCENT:-25}
THIN_FLAGS=${THIN_FLAGS:---streams 2}
THIN_CAP_MIB=${THIN_CAP_MIB:-0}

# Debian packages: curl, openssl, coreutils (tee, sha256sum), time.
hack/install-debian-packages.sh curl openssl coreutils time

work=$(mktemp -d "${TMPDIR:-/tmp}/bench-transfer.XXXXXX")
sim_pid=
stop_sim() {
	if [ -n "$sim_pid" ]; then
		kill "$sim_pid" 2>/dev/null || true
		wait "$sim_pid" 2>/dev/null || true
		sim_pid=
	fi
}
cleanup() {
	stop_sim
	rm -rf "$work"
}
trap cleanup EXIT

echo "building vm-transfer and benchsim..."
go build -o "$work/bin/vm-transfer" ./cmd/vm-transfer
go build -o "$work/bin/benchsim" ./hack/benchsim

# start_sim DIR SIZE_MIB [benchsim flags]: serve a disk, source its description.
start_sim() {
	local dir=$1 size=$2
	shift 2
	mkdir -p "$dir"
	echo "starting vcsim with a $size MiB disk in $dir $*..."
	"$work/bin/benchsim" --work-dir "$dir" --size-mib "$size" "$@" >"$dir/env" 2>"$dir/sim.log" &
	sim_pid=$!
	for _ in $(seq 900); do
		grep -q '^READY=1' "$dir/env" 2>/dev/null && break
		kill -0 "$sim_pid" 2>/dev/null || { cat "$dir/sim.log" >&2; exit 1; }
		sleep 0.2
	done
	grep -q '^READY=1' "$dir/env" || { echo "bench-transfer: vcsim did not start" >&2; exit 1; }
	# shellcheck disable=SC1091
	source "$dir/env"
}

# root FILE: the block tree root of FILE (vm-transfer checksum).
root() { "$work/bin/vm-transfer" checksum "$1" | cut -c1-64; }
calc() { awk "BEGIN { printf \"%.${2:-2}f\", $1 }"; }
# timed FILE CMD...: run CMD under /usr/bin/time into FILE (wall user sys maxrss-KiB).
timed() {
	local out=$1
	shift
	/usr/bin/time -f '%e %U %S %M' -o "$out" "$@"
}
wall() { awk '{ print $1 }' "$1"; }
cpu() { awk '{ printf "%.2f", $2 + $3 }' "$1"; }
rss_mib() { awk '{ printf "%d", $4 / 1024 }' "$1"; }
sim_cpu() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$sim_pid/stat"; }
# run_xfer DIR FLAGS...: one vm-transfer run of the disk in DIR, timed into DIR/time.
run_xfer() {
	local dir=$1
	shift
	rm -f "$IMAGE"
	timed "$dir/time" "$work/bin/vm-transfer" --spec "$SPEC" --credentials-dir "$CREDS" \
		--termination-log "$dir/result.json" --progress-interval 2s "$@" >"$dir/out.jsonl"
	want=$(sed -n 's/.*"sha256":"\([0-9a-f]*\)".*/\1/p' "$dir/result.json")
	[ -n "$want" ] || { echo "bench-transfer: vm-transfer gave no checksum" >&2; cat "$dir/result.json" >&2; exit 1; }
}

# --- Streams over capped connections -------------------------------------
if [ "$CAP_MIB" != 0 ]; then
	start_sim "$work/capped" "$CAP_SIZE_MIB" --conn-rate-mib "$CAP_MIB"
	cap_rows=()
	for k in $CAP_STREAMS; do
		s0=$(sim_cpu)
		# shellcheck disable=SC2086
		run_xfer "$work/capped" --streams "$k" $CAP_FLAGS
		s1=$(sim_cpu)
		t=$(wall "$work/capped/time")
		copy=$(sed -n 's/.*"durationSeconds":\([0-9.e+-]*\).*/\1/p' "$work/capped/result.json")
		rate=$(calc "$SIZE / 1048576 / $copy" 1)
		busy=$(calc "100 * ($(cpu "$work/capped/time") + $s1 - $s0) / $t / $(nproc)" 0)
		cap_rows+=("$(printf '%7s %10s %10s %10s %9s%% %9s%% %8s' "$k" "$(calc "$SIZE / 1048576 / $t" 1)" "$rate" \
			"$(calc "0.9 * $k * $CAP_MIB" 1)" "$(calc "100 * $rate / ($k * $CAP_MIB)" 0)" "$busy" "$(rss_mib "$work/capped/time")")")
	done
	[ "$(root "$IMAGE")" = "$want" ] || { echo "bench-transfer: capped run: checksum mismatch" >&2; exit 1; }
	stop_sim
	echo
	echo "streams over connections capped at $CAP_MIB MiB/s each, $CAP_SIZE_MIB MiB disk ($CAP_FLAGS; checksums match);"
	echo "wall: the whole command (login, plan, copy); copy: the disk's own duration; CPU busy: client + server over both CPUs:"
	printf '%7s %10s %10s %10s %10s %10s %8s\n' streams "wall MiB/s" "copy MiB/s" "goal" "of Kxcap" "CPU busy" "RSS MiB"
	printf '%s\n' "${cap_rows[@]}"
	echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
	echo
fi

# --- Allocated-only on a thin disk -----------------------------------------
if [ "$THIN_SIZE_MIB" != 0 ]; then
	start_sim "$work/thin" "$THIN_SIZE_MIB" --thin-percent "$THIN_PERCENT" --conn-rate-mib "$THIN_CAP_MIB"
	# result FIELD: a number from the last run's result (the first disk's).
	result() { sed -n 's/.*"'"$1"'":\([0-9]*\).*/\1/p' "$work/thin/result.json"; }
	full_best= areas_best=
	for round in $(seq "$ROUNDS"); do
		# shellcheck disable=SC2086
		SPEC=$SPEC_FULL run_xfer "$work/thin" $THIN_FLAGS
		[ "$want" = "$(root "$IMAGE")" ] || { echo "bench-transfer: full copy of the thin disk: root $want, not the image's" >&2; exit 1; }
		thin_root=$want
		[ "$(result bytesRead)" = "$SIZE" ] || { echo "bench-transfer: the full copy read $(result bytesRead) of $SIZE bytes" >&2; exit 1; }
		tf=$(wall "$work/thin/time")
		full_best=$(awk -v a="$full_best" -v b="$tf" 'BEGIN { print (a == "" || b < a) ? b : a }')
		# shellcheck disable=SC2086
		run_xfer "$work/thin" $THIN_FLAGS
		[ "$want" = "$thin_root" ] || { echo "bench-transfer: allocated-only copy: root $want, the full copy's $thin_root" >&2; exit 1; }
		grep -q '"allocatedOnly":true' "$work/thin/result.json" || { echo "bench-transfer: the thin disk was not copied allocated-only:" >&2; cat "$work/thin/result.json" >&2; exit 1; }
		t=$(wall "$work/thin/time")
		areas_best=$(awk -v a="$areas_best" -v b="$t" 'BEGIN { print (a == "" || b < a) ? b : a }')
		echo "thin round $round: full copy ${tf}s, allocated-only ${t}s"
	done
	[ "$(sha256sum "$IMAGE" | cut -d' ' -f1)" = "$SOURCE_SHA256" ] || { echo "bench-transfer: the allocated-only image's sha256 is not the source's" >&2; exit 1; }
	allocated=$(result allocatedBytes) read=$(result bytesRead)
	streams=$(echo "$THIN_FLAGS" | sed -n 's/.*--streams[ =]\([0-9]*\).*/\1/p')
	chunk_mib=$(echo "$THIN_FLAGS" | sed -n 's/.*--chunk-mib[ =]\([0-9]*\).*/\1/p')
	bound=$((allocated + ${streams:-1} * ${chunk_mib:-8} * 1048576))
	[ "$read" -le "$bound" ] || { echo "bench-transfer: read $read bytes, more than allocated $allocated plus one chunk per stream" >&2; exit 1; }
	stop_sim
	thin_line="allocated-only: capacity=$SIZE allocated=$allocated read=$read full=${full_best}s areas=${areas_best}s speedup=$(calc "$full_best / $areas_best")"
	cap_note=
	[ "$THIN_CAP_MIB" != 0 ] && cap_note=", connections capped at $THIN_CAP_MIB MiB/s"
	thin_title="thin disk of $THIN_SIZE_MIB MiB, about $THIN_PERCENT% written in scattered runs, change tracking on ($THIN_FLAGS$cap_note); whole vs allocated areas, best of $ROUNDS; checksums match the source's:"
	echo
fi

# --- vm-transfer against curl --------------------------------------------
if [ "${MAIN:-1}" = 0 ]; then echo "$thin_title"; echo "$thin_line"; exit 0; fi
start_sim "$work/main" "$SIZE_MIB"
gib=$(calc "$SIZE / 1073741824" 6)
curl_args=(-sS -k -b "$COOKIE" "$FLAT_URL")
# results: one line per tool and round: "tool MiB/s cpu/GiB server-cpu/GiB"
: >"$work/results"
record() { # tool timefile serverCPU
	echo "$1 $(calc "$SIZE / 1048576 / $(wall "$2")" 1) $(calc "$(cpu "$2") / $gib") $(calc "$3 / $gib")" >>"$work/results"
}
# measure TOOL CMD...: the page cache written back (not timed), then CMD
# timed into $work/TOOL.time and recorded with the simulator's CPU meanwhile.
measure() {
	local tool=$1 s
	shift
	sync
	s=$(sim_cpu)
	timed "$work/$tool.time" "$@"
	record "$tool" "$work/$tool.time" "$(calc "$(sim_cpu) - $s")"
}
rss_kib=0
for round in $(seq "$ROUNDS"); do
	got=$(measure a curl -o /dev/null -w '%{size_download}' "${curl_args[@]}")
	[ "$got" = "$SIZE" ] || { echo "bench-transfer: curl got $got bytes of $SIZE" >&2; exit 1; }
	rm -f "$work/curl.img"
	measure b curl -o "$work/curl.img" "${curl_args[@]}"
	rm -f "$work/synced.img"
	measure d bash -c 'curl -o "'"$work/synced.img"'" "$@" && sync "'"$work/synced.img"'"' _ "${curl_args[@]}"
	rm -f "$work/synced.img" "$work/tee.img"
	measure c bash -c 'curl "$@" | tee "'"$work/tee.img"'" | openssl dgst -sha256 -r >"'"$work/c.sum"'"' _ "${curl_args[@]}"

	sync
	s0=$(sim_cpu)
	run_xfer "$work/main" $XFER_FLAGS
	record x "$work/main/time" "$(calc "$(sim_cpu) - $s0")"
	rss=$(awk '{ print $4 }' "$work/main/time")
	[ "$rss" -gt "$rss_kib" ] && rss_kib=$rss

	timed "$work/h.time" openssl dgst -sha256 -r "$work/curl.img" >/dev/null
	echo "h 0 $(calc "$(cpu "$work/h.time") / $gib") 0" >>"$work/results"
	awk -v r="$round" '{ l[NR] = $0 } END {
		printf "round %d:", r
		for (i = NR - 5; i <= NR; i++) { split(l[i], f, " "); printf " %s %s MiB/s %s CPU-s/GiB;", f[1], f[2], f[3] }
		printf "\n" }' "$work/results"
done

# The result's checksum must be the image's and the one openssl computed in (c).
got=$(sha256sum "$IMAGE" | cut -d' ' -f1)
[ "$want" = "$(root "$IMAGE")" ] || { echo "bench-transfer: checksum mismatch: result $want, image $(root "$IMAGE")" >&2; exit 1; }
[ "$(cut -d' ' -f1 "$work/c.sum")" = "$got" ] || { echo "bench-transfer: (c) computed another digest" >&2; exit 1; }
size=$(stat -c %s "$IMAGE")
alloc=$(($(stat -c %b "$IMAGE") * $(stat -c %B "$IMAGE")))

# best TOOL FIELD max|min: best value over the rounds; spread TOOL FIELD: "min-max".
best() { awk -v t="$1" -v f="$2" -v m="$3" '$1 == t { v = $f + 0; if (n++ == 0 || (m == "max" ? v > b : v < b)) b = v } END { print b }' "$work/results"; }
spread() { awk -v t="$1" -v f="$2" '$1 == t { v = $f + 0; if (n++ == 0 || v < lo) lo = v; if (v > hi) hi = v } END { printf "%s-%s", lo, hi }' "$work/results"; }
echo
echo "$SIZE_MIB MiB disk, $ROUNDS rounds; MiB/s best (spread), client CPU-s per GiB lowest (spread), server CPU-s per GiB lowest:"
for t in a b d c x; do
	case $t in
	a) name="(a) curl -o /dev/null" ;;
	b) name="(b) curl -o file" ;;
	d) name="(d) curl -o file && sync file" ;;
	c) name="(c) curl | tee file | openssl dgst" ;;
	x) name="vm-transfer $XFER_FLAGS" ;;
	esac
	printf '  %-36s %8s MiB/s (%s)  cpu/GiB %5s (%s)  server %5s\n' "$name" "$(best $t 2 max)" "$(spread $t 2)" \
		"$(best $t 3 min)" "$(spread $t 3)" "$(best $t 4 min)"
done
printf '  %-36s %8s        cpu/GiB %5s (%s)\n' "openssl dgst -sha256 (hash only)" "" "$(best h 3 min)" "$(spread h 3)"
echo "image: $size bytes, $alloc allocated, sha256 $got (matches (c)), tree root $want (matches the result)"
echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg); client and server share them"
if [ -n "${thin_line:-}" ]; then
	echo "$thin_title"
	echo "$thin_line"
fi
# Against the wire alone (a), the wire and a write (b), a durable write
# (d), the same work (c).
ratio=$(calc "$(best x 2 max) / $(best a 2 max)")
to_file=$(calc "$(best x 2 max) / $(best b 2 max)")
synced=$(calc "$(best x 2 max) / $(best d 2 max)")
same=$(calc "$(best x 2 max) / $(best c 2 max)")
ideal=$(calc "$(best a 3 min) + $(best h 3 min)")
echo "transfer/curl throughput ratio: $ratio (to a file: $to_file; synced: $synced; same work: $same), peak RSS: $((rss_kib / 1024)) MiB, cpu/GiB: $(best x 3 min) (ideal: $ideal)"
