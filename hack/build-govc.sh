#!/usr/bin/env bash
# Builds govc, govmomi's command line, with the command set of the govmomi
# version the project's go.mod requires: hack/tools/govc registers the
# commands of github.com/vmware/govmomi/cli as upstream's govc does
# (upstream keeps govc's main package in a module the Go module proxy does
# not serve). A separate tools module keeps the project's own go.mod free
# of govc's dependencies; the script fails when its govmomi is not the
# project's. Use it against make run-local's vCenter simulator
# (docs/contributors/testing.md, The local vCenter).
#
# The binary is cached outside the clone, keyed by the tools module's
# go.mod/go.sum/main.go and the Go version: a second run takes
# milliseconds. The script prints the cache folder on its last line and
# points the git-ignored ./_output/govc link at it.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# take_build_lock
. "$root/hack/lib/upstream-build.sh"
tools="$root/hack/tools/govc"
module=github.com/vmware/govmomi
# required_version <go.mod> prints the version of $module it requires.
required_version() { awk -v m="$module" '$1=="require" {$1=""; $0=$0} $1==m {print $2; exit}' "$1"; }
version=$(required_version "$tools/go.mod")
project=$(required_version "$root/go.mod")
[ -n "$version" ] || { echo "hack/tools/govc/go.mod requires no $module" >&2; exit 1; }
[ "$version" = "$project" ] || {
  echo "hack/tools/govc/go.mod requires $module $version, the project's go.mod $project: set it to $project and run go mod tidy there" >&2
  exit 1
}
key=$(cat "$tools/go.mod" "$tools/go.sum" "$tools/main.go" <(go env GOVERSION) | sha256sum | cut -c1-16)
cache_root=${GOVC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vm-migration/govc}
dir="$cache_root/${version}-${key}"

complete() { [ -x "$dir/govc" ]; }

if ! complete; then
  take_build_lock "$cache_root" govc
fi
if ! complete; then
  start=$SECONDS
  mkdir -p "$dir.tmp"
  echo "building govc of $module $version (about a minute with a cold Go build cache)" >&2
  (cd "$tools" && CGO_ENABLED=0 go build -mod=readonly -trimpath \
    -ldflags "-s -w -X $module/cli/flags.BuildVersion=$version" -o "$dir.tmp/govc" .)
  # A binary that does not run or names another version never enters the
  # cache.
  out=$("$dir.tmp/govc" version 2>&1) || true
  if [ "$out" != "govc ${version#v}" ]; then
    echo "govc version says '$out', not 'govc ${version#v}': removed, run again" >&2
    rm -rf "$dir.tmp"
    exit 1
  fi
  rm -rf "$dir"
  mv "$dir.tmp" "$dir"
  echo "built govc in $((SECONDS - start))s" >&2
fi

mkdir -p "$root/_output"
ln -sfn "$dir" "$root/_output/govc"
echo "$dir"
