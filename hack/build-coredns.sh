#!/usr/bin/env bash
# Builds CoreDNS, the DNS server for the test node's cluster DNS, from the Go
# module proxy: upstream's main package (github.com/coredns/coredns, its
# default plugin set, kubernetes, forward, cache... included) from the tools
# module hack/tools/coredns, static (CGO_ENABLED=0), -trimpath. A separate
# tools module keeps the project's own go.mod free of CoreDNS's
# dependencies.
#
# The binary is cached outside the clone, keyed by the tools module's
# go.mod/go.sum and the Go version, as hack/build-testbin.sh and
# hack/build-cdi.sh do: a second run takes seconds. The script prints the
# cache folder on its last line and points the git-ignored
# ./_output/coredns link at it; BUILD-INFO in it has the version and the
# build time. On a shared machine run it as `nice -n 19 hack/build-coredns.sh`.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# take_build_lock
. "$root/hack/lib/upstream-build.sh"
tools="$root/hack/tools/coredns"
module=github.com/coredns/coredns
version=$(awk -v m="$module" '$1=="require" {$1=""; $0=$0} $1==m {print $2; exit}' "$tools/go.mod")
[ -n "$version" ] || { echo "hack/tools/coredns/go.mod requires no $module" >&2; exit 1; }
key=$(cat "$tools/go.mod" "$tools/go.sum" <(go env GOVERSION) | sha256sum | cut -c1-16)
cache_root=${COREDNS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vm-migration/coredns}
dir="$cache_root/${version}-${key}"

complete() {
  [ -x "$dir/coredns" ] && [ -s "$dir/BUILD-INFO" ]
}

if ! complete; then
  take_build_lock "$cache_root" CoreDNS
fi

if ! complete; then
  start=$SECONDS
  mkdir -p "$dir.tmp"
  echo "building CoreDNS $version (minutes with a cold Go build cache)" >&2
  (cd "$tools" && CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "-s -w" -o "$dir.tmp/coredns" "$module")
  took=$((SECONDS - start))
  # A binary that does not run or reports another version (truncated by a
  # full disk, wrong platform) never enters the cache. CoreDNS prints
  # CoreDNS-<version without v>.
  out=$("$dir.tmp/coredns" -version 2>&1) || true
  if ! grep -qxF "CoreDNS-${version#v}" <<<"$out"; then
    echo "coredns does not report CoreDNS-${version#v} (it said: $out): removed, run again" >&2
    rm -f "$dir.tmp/coredns"
    exit 1
  fi
  {
    echo "coredns $version"
    echo "go $(go env GOVERSION)"
    echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) in ${took}s, $(stat -c %s "$dir.tmp/coredns") bytes"
    echo "plugins $("$dir.tmp/coredns" -plugins | tr '\n' ' ')"
  } >"$dir.tmp/BUILD-INFO"
  rm -rf "$dir"
  mv "$dir.tmp" "$dir"
  echo "built coredns in ${took}s" >&2
fi

mkdir -p "$root/_output"
ln -sfn "$dir" "$root/_output/coredns"
echo "$dir"
