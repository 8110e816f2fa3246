#!/usr/bin/env bash
# Builds the test node's real storage: Rancher's local-path-provisioner
# (github.com/rancher/local-path-provisioner, the dynamic provisioner k3s
# ships), from the Go module proxy through the tools module
# hack/tools/local-path, static (CGO_ENABLED=0), -trimpath, and its two
# images for the node, built here with go-containerregistry
# (hack/cdiimage) and never pulled, as docker-archive tarballs that
# `ctr -n k8s.io images import` takes:
#
#   local-path-provisioner  the static binary alone, as user 65532;
#                           entrypoint /usr/bin/local-path-provisioner
#   local-path-helper       Debian's static busybox as /bin/sh, mkdir, rm,
#                           chmod: the helper pod the provisioner starts on
#                           the node runs the setup and teardown scripts of
#                           its ConfigMap with it, as root
#
# Why this driver: csi-driver-host-path, external-provisioner and
# node-driver-registrar, the CSI driver and sidecars that issue 29 names,
# are refused by this machine's module proxy (403 for every version); the
# provisioner is the widely used one that is served. Its volumes are
# hostPath PersistentVolumes on the node, Filesystem only, ReadWriteOnce.
#
# Cached outside the clone, keyed by the tools module's go.mod/go.sum, this
# script, hack/cdiimage, the Go version and the busybox package: a second
# run takes seconds. The script prints the cache folder on its last line
# and points the git-ignored ./_output/local-path link at it; it holds the
# binary, the tarballs, `images` (one line per image: name, reference,
# tarball) and BUILD-INFO (version, times, sizes). Needs root for the
# busybox package's download only when the cache lacks it. On a shared
# machine run it as `nice -n 19 hack/build-local-path.sh`.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# take_build_lock
. "$root/hack/lib/upstream-build.sh"
tools="$root/hack/tools/local-path"
module=github.com/rancher/local-path-provisioner
repo=platform.example/vm-migration
version=$(awk -v m="$module" '$1=="require" {$1=""; $0=$0} $1==m {print $2; exit}' "$tools/go.mod")
[ -n "$version" ] || { echo "hack/tools/local-path/go.mod requires no $module" >&2; exit 1; }
key=$(cat "$tools/go.mod" "$tools/go.sum" "${BASH_SOURCE[0]}" "$root"/hack/cdiimage/*.go "$root"/hack/image/ociimage/*.go <(go env GOVERSION) |
  sha256sum | cut -c1-16)
cache_root=${LOCAL_PATH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vm-migration/local-path}
dir="$cache_root/${version}-${key}"

complete() {
  [ -x "$dir/local-path-provisioner" ] && [ -s "$dir/images" ] && [ -s "$dir/BUILD-INFO" ]
}

if ! complete; then
  take_build_lock "$cache_root" local-path-provisioner
fi

if ! complete; then
  start=$SECONDS
  rm -rf "$dir.tmp"
  mkdir -p "$dir.tmp"
  echo "building local-path-provisioner $version (minutes with a cold Go build cache)" >&2
  (cd "$tools" && CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "-s -w -X main.VERSION=$version" \
    -o "$dir.tmp/local-path-provisioner" "$module")
  took=$((SECONDS - start))
  # A binary that does not run or reports another version never enters
  # the cache.
  out=$("$dir.tmp/local-path-provisioner" --version 2>&1) || true
  if ! grep -qF "version $version" <<<"$out"; then
    echo "local-path-provisioner does not report version $version (it said: $out): run again" >&2
    rm -rf "$dir.tmp"
    exit 1
  fi

  bb="$dir.tmp/busybox"
  mkdir -p "$bb"
  (cd "$bb" && apt-get download -q -o APT::Sandbox::User=root busybox-static >&2 && dpkg-deb -x busybox-static_*.deb x)
  [ -x "$bb/x/bin/busybox" ] || { echo "busybox-static has no /bin/busybox" >&2; exit 1; }
  busybox_version=$(dpkg-deb -f "$bb"/busybox-static_*.deb Version)

  provisioner_ref="$repo/local-path-provisioner:$version"
  helper_ref="$repo/local-path-helper:$version"
  (cd "$root" && go run ./hack/cdiimage -image "$provisioner_ref" -out "$dir.tmp/local-path-provisioner.tar" \
    -file "/usr/bin/local-path-provisioner=$dir.tmp/local-path-provisioner" -dir /tmp=1777 \
    -entrypoint /usr/bin/local-path-provisioner -user 65532)
  (cd "$root" && go run ./hack/cdiimage -image "$helper_ref" -out "$dir.tmp/local-path-helper.tar" \
    -file "/bin/busybox=$bb/x/bin/busybox" -link /bin/sh=busybox -link /bin/mkdir=busybox -link /bin/rm=busybox \
    -link /bin/chmod=busybox -dir /tmp=1777 -entrypoint /bin/sh -user 0)
  rm -rf "$bb"
  {
    echo "provisioner $provisioner_ref local-path-provisioner.tar"
    echo "helper $helper_ref local-path-helper.tar"
  } >"$dir.tmp/images"
  {
    echo "local-path-provisioner $version"
    echo "go $(go env GOVERSION)"
    echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ): binary in ${took}s, $(stat -c %s "$dir.tmp/local-path-provisioner") bytes; everything in $((SECONDS - start))s"
    echo "image local-path-provisioner.tar $(stat -c %s "$dir.tmp/local-path-provisioner.tar") bytes"
    echo "image local-path-helper.tar $(stat -c %s "$dir.tmp/local-path-helper.tar") bytes (busybox-static $busybox_version)"
  } >"$dir.tmp/BUILD-INFO"
  rm -rf "$dir"
  mv "$dir.tmp" "$dir"
  sed 's/^/  /' "$dir/BUILD-INFO" >&2
fi

mkdir -p "$root/_output"
ln -sfn "$dir" "$root/_output/local-path"
echo "$dir"
