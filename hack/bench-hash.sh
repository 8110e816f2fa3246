#!/usr/bin/env bash
# The block tree's hashing against sha256sum, in the same run, on the same
# files: vm-transfer checksum (the root of the image's block tree: a
# SHA-256 per 1 MiB block, on every core, a file's holes unread) on one
# core (taskset -c 0 and GOMAXPROCS=1) and on all of them, and sha256sum
# (one SHA-256 of the whole file, one core, holes read as zeros; coreutils'
# own code, which Debian does not link with OpenSSL) and, as the fastest
# single SHA-256 at hand, openssl dgst -sha256 (SHA extensions), over
#   - a SIZE_MIB (2048) file of random data, and
#   - a SIZE_MIB sparse file with about 25% of it allocated (SPARSE_PERCENT:
#     a run of random data at the start of every 8 MiB, holes between).
# Each file is read once before it is timed (page cache warm: this
# measures hashing, not the disk). Per tool: best wall seconds of ROUNDS
# (3), MiB/s, and the lowest CPU seconds (user + system, /usr/bin/time)
# per GiB of file. The roots are checked against the coreutils pipeline
# of package blocktree (split --filter sha256sum), once per file.
#
# Environment: SIZE_MIB (2048), ROUNDS (3), SPARSE_PERCENT (25), TMPDIR.
set -euo pipefail

cd "$(dirname "$0")/.."
SIZE_MIB=${SIZE_MIB:-2048}
ROUNDS=${ROUNDS:-3}
SPARSE_PERCENT=${SPARSE_PERCENT:-25}

# Debian packages: coreutils (sha256sum, split, head), time, util-linux (taskset), openssl.
hack/install-debian-packages.sh coreutils time util-linux openssl

work=$(mktemp -d "${TMPDIR:-/tmp}/bench-hash.XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "building vm-transfer..."
go build -o "$work/vm-transfer" ./cmd/vm-transfer

size=$((SIZE_MIB << 20))
echo "writing a $SIZE_MIB MiB random file and a $SIZE_MIB MiB sparse one ($SPARSE_PERCENT% allocated)..."
head -c "$size" /dev/urandom >"$work/random.img"
truncate -s "$size" "$work/sparse.img"
seg=$((8 << 20)) run=$(((8 << 20) * SPARSE_PERCENT / 100))
for ((off = 0; off < size; off += seg)); do
	dd if="$work/random.img" of="$work/sparse.img" bs=1M iflag=count_bytes,skip_bytes oflag=seek_bytes \
		skip="$off" seek="$off" count="$run" conv=notrunc status=none
done
allocated=$(($(stat -c %b "$work/sparse.img") * $(stat -c %B "$work/sparse.img")))

calc() { awk "BEGIN { printf \"%.${2:-2}f\", $1 }"; }
gib=$(calc "$size / 1073741824" 6)
all=$(nproc)

# results: "file tool wall cpu" per round.
: >"$work/results"
timed() { # file tool cmd...
	local file=$1 tool=$2
	shift 2
	/usr/bin/time -f '%e %U %S' -o "$work/time" "$@" >"$work/out"
	echo "$file $tool $(awk '{ printf "%s %.3f", $1, $2 + $3 }' "$work/time")" >>"$work/results"
}

for file in random sparse; do
	img=$work/$file.img
	cat "$img" >/dev/null # warm the page cache
	want=$(split -b 1048576 --filter='sha256sum | cut -c1-64' "$img" | sha256sum | cut -c1-64)
	for round in $(seq "$ROUNDS"); do
		timed "$file" sha256sum sha256sum "$img"
		timed "$file" openssl openssl dgst -sha256 -r "$img"
		timed "$file" one-core env GOMAXPROCS=1 taskset -c 0 "$work/vm-transfer" checksum "$img"
		[ "$(cut -c1-64 "$work/out")" = "$want" ] || { echo "bench-hash: vm-transfer checksum of $file is not the coreutils root" >&2; exit 1; }
		timed "$file" all-cores "$work/vm-transfer" checksum "$img"
		[ "$(cut -c1-64 "$work/out")" = "$want" ] || { echo "bench-hash: vm-transfer checksum of $file is not the coreutils root" >&2; exit 1; }
		echo "$file round $round: $(awk -v f="$file" '$1 == f { l[n++] = $2 " " $3 "s" } END { printf "%s, %s, %s, %s", l[n-4], l[n-3], l[n-2], l[n-1] }' "$work/results")"
	done
done

best() { awk -v f="$1" -v t="$2" -v c="$3" '$1 == f && $2 == t { v = $c + 0; if (n++ == 0 || v < b) b = v } END { print b }' "$work/results"; }
echo
echo "$SIZE_MIB MiB files, page cache warm, best of $ROUNDS; CPU-s/GiB is user + system per GiB of file (lowest):"
printf '  %-8s %-54s %8s %9s %10s\n' file tool seconds MiB/s CPU-s/GiB
for file in random sparse; do
	for tool in sha256sum openssl one-core all-cores; do
		case $tool in
		sha256sum) name="sha256sum (whole-file SHA-256)" ;;
		openssl) name="openssl dgst -sha256 (whole-file SHA-256)" ;;
		one-core) name="vm-transfer checksum, 1 core (taskset, GOMAXPROCS=1)" ;;
		all-cores) name="vm-transfer checksum, $all cores" ;;
		esac
		w=$(best "$file" "$tool" 3) c=$(best "$file" "$tool" 4)
		printf '  %-8s %-54s %8s %9s %10s\n' "$file" "$name" "$w" "$(calc "$SIZE_MIB / $w" 0)" "$(calc "$c / $gib")"
	done
done
echo "sparse file: $allocated bytes allocated of $size; roots match the coreutils pipeline"
echo "machine: $all CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), sha_ni: $(grep -qw sha_ni /proc/cpuinfo && echo yes || echo no), load average $(cut -d' ' -f1-3 /proc/loadavg)"
ratio=$(calc "$(best random sha256sum 3) / $(best random all-cores 3)")
sratio=$(calc "$(best sparse sha256sum 3) / $(best sparse all-cores 3)")
echo "checksum/sha256sum speedup: random $ratio, sparse $sratio (all cores); one core, random: $(calc "$(best random sha256sum 3) / $(best random one-core 3)");" \
	"checksum/openssl: random $(calc "$(best random openssl 3) / $(best random all-cores 3)"), sparse $(calc "$(best sparse openssl 3) / $(best sparse all-cores 3)") (all cores)"
