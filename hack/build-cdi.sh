#!/usr/bin/env bash
# Builds the Containerized Data Importer (CDI) from the Go module proxy, from
# the tools module hack/tools/cdi (kubevirt.io/containerized-data-importer
# and its api at the same version, upstream's replaces, our libnbd stub):
#   - cdi-controller, cdi-apiserver, cdi-uploadproxy, cdi-importer,
#     cdi-cloner and cdi-uploadserver, and the helper
#     cdi-image-size-detection, static (CGO_ENABLED=0), -trimpath;
#   - crds/*.yaml: CDI's CustomResourceDefinitions, which CDI ships as YAML
#     strings in pkg/operator/resources/crds_generated.go, written out by
#     hack/cdicrds (reads that file with go/ast; never compiles CDI).
# A separate tools module keeps the project's own go.mod free of CDI and of
# the older Kubernetes libraries it pins.
#
# The output is cached outside the clone in one folder, keyed by the tools
# module (go.mod, go.sum, the libnbd stub), hack/cdicrds and the Go version,
# so a second run takes seconds. The script prints the cache folder on its
# last line and points the git-ignored ./_output/cdi link at it. The folder
# also holds BUILD-INFO: the versions and each binary's build time.
#
# `hack/build-cdi.sh --crds` writes only the CRDs, without building CDI
# (seconds), into a folder of their own, and prints it.
#
# With a cold Go build cache this takes many minutes (cdi-controller and
# cdi-importer the longest); on a shared machine run it as
# `nice -n 19 hack/build-cdi.sh`.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# take_build_lock, build_binary, check_module
. "$root/hack/lib/upstream-build.sh"
tools="$root/hack/tools/cdi"
module=kubevirt.io/containerized-data-importer
# required_version <go.mod> <module> prints the version go.mod requires
# (in a require block or on a one-line require).
required_version() {
  awk -v m="$2" '$1=="require" {$1=""; $0=$0} $1==m {print $2; exit}' "$1"
}
cdi_version=$(required_version "$tools/go.mod" "$module")
[ -n "$cdi_version" ] || { echo "hack/tools/cdi/go.mod requires no $module" >&2; exit 1; }
key=$(cat "$tools/go.mod" "$tools/go.sum" "$tools"/libnbd/go.mod "$tools"/libnbd/*.go \
  "$root"/hack/cdicrds/*.go <(go env GOVERSION) | sha256sum | cut -c1-16)
cache_root=${CDI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vm-migration/cdi}
dir="$cache_root/${cdi_version}-${key}"
binaries=(cdi-controller cdi-apiserver cdi-uploadproxy cdi-importer cdi-cloner cdi-uploadserver)
# CDI's helpers its controller runs from the importer image: the size
# detection of a host-assisted clone of KubeVirt content without a size
# (qemu-img info of the source's disk.img), which the controller's
# DataVolumes are.
helpers=(cdi-image-size-detection)

# --crds: only CDI's CRDs, read from the module's source without building
# anything (seconds, after the module's download): what the e2e suite and
# make run-local need beside KubeVirt, whose virt-controller waits for
# them. Prints the folder holding crds/.
if [ "${1:-}" = --crds ]; then
  crds_dir="$cache_root/crds-${cdi_version}-${key}"
  if [ ! -s "$crds_dir/crds/datavolume.yaml" ]; then
    (cd "$tools" && go mod download "$module")
    src=$(cd "$tools" && go list -mod=readonly -m -f '{{.Dir}}' "$module")
    rm -rf "$crds_dir.tmp"
    mkdir -p "$crds_dir.tmp"
    (cd "$root" && go run ./hack/cdicrds -src "$src/pkg/operator/resources/crds_generated.go" -out "$crds_dir.tmp/crds")
    rm -rf "$crds_dir"
    mv "$crds_dir.tmp" "$crds_dir"
  fi
  echo "$crds_dir"
  exit 0
fi

complete() {
  for b in "${binaries[@]}" "${helpers[@]}"; do [ -x "$dir/$b" ] || return 1; done
  [ -s "$dir/crds/datavolume.yaml" ] && [ -s "$dir/BUILD-INFO" ]
}

if ! complete; then
  take_build_lock "$cache_root" CDI
fi

if ! complete; then
  start=$SECONDS
  mkdir -p "$dir.tmp"
  vpkg=$module/pkg/version
  ldflags="-s -w -X $vpkg.gitVersion=$cdi_version -X $vpkg.gitTreeState=clean"
  echo "building ${binaries[*]} ${helpers[*]} of CDI $cdi_version (tens of minutes with a cold Go build cache, a few minutes warm)" >&2
  for b in "${binaries[@]}"; do
    build_binary "$b" "$module/cmd/$b"
  done
  for b in "${helpers[@]}"; do
    build_binary "$b" "$module/tools/$b"
  done
  for b in "${binaries[@]}" "${helpers[@]}"; do
    check_module "$b" "$module" "$cdi_version"
  done
  # cdi-apiserver reports the version stamped into pkg/version.
  out=$("$dir.tmp/cdi-apiserver" --version 2>&1) || true
  if ! grep -qxF "Containerized Data Importer $cdi_version" <<<"$out"; then
    echo "cdi-apiserver does not report $cdi_version (it said: $out): removed, run again" >&2
    rm -f "$dir.tmp/cdi-apiserver"
    exit 1
  fi

  # The CRDs, from the same module version the binaries were built from.
  src=$(cd "$tools" && go list -mod=readonly -m -f '{{.Dir}}' "$module")
  rm -rf "$dir.tmp/crds"
  (cd "$root" && go run ./hack/cdicrds -src "$src/pkg/operator/resources/crds_generated.go" -out "$dir.tmp/crds")

  {
    echo "cdi $cdi_version"
    echo "api $(required_version "$tools/go.mod" "$module-api")"
    echo "go $(go env GOVERSION)"
    echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) in $((SECONDS - start))s (per binary, when this run built it:)"
    cat "$dir.tmp/times" 2>/dev/null || true
    echo "crds $(ls "$dir.tmp/crds" | tr '\n' ' ')"
  } >"$dir.tmp/BUILD-INFO"
  rm -rf "$dir"
  mv "$dir.tmp" "$dir"
  echo "built in $((SECONDS - start))s" >&2
fi

mkdir -p "$root/_output"
ln -sfn "$dir" "$root/_output/cdi"
echo "$dir"
