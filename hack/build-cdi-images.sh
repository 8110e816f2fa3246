#!/usr/bin/env bash
# make cdi-images: the images of CDI v1.65.0 (the binaries of
# hack/build-cdi.sh) for the test node, built here and never pulled, each a
# docker-archive tarball that `ctr -n k8s.io images import` takes:
#
#   cdi-importer      cdi-importer on Debian's qemu-utils (qemu-img), nbdkit
#                     (its curl plugin and filters) and ca-certificates,
#                     with CDI's cdi-image-size-detection (the clone's size
#                     detection pod runs it from this image);
#                     entrypoint /usr/bin/cdi-importer -alsologtostderr
#   cdi-cloner        cdi-cloner on bash, coreutils, tar (and a /usr/bin/tar
#                     link where the release has only /bin/tar) and
#                     util-linux; entrypoint /usr/bin/cloner_startup.sh, CDI's
#                     own script, copied from the module cache at build time
#   cdi-uploadserver  cdi-uploadserver on qemu-utils;
#                     entrypoint /usr/bin/cdi-uploadserver -alsologtostderr
#   cdi-controller    static binaries only: cdi-controller, and Debian's
#                     static busybox as /usr/bin/cat (the readiness probe CDI
#                     gives the controller runs `cat /tmp/ready`)
#   cdi-apiserver     cdi-apiserver alone
#   cdi-uploadproxy   cdi-uploadproxy alone
#
# every one as user 1001, as upstream's are. The Debian root file systems
# are made by mmdebstrap (variant essential) from the machine's own release
# and apt lists, packed as sorted tars with numeric owners and clamped
# mtimes; hack/cdiimage (go-containerregistry) adds CDI's files as a second
# layer and the config. The folder also holds resources/: the RBAC, the
# APIService and the webhook configurations of CDI's operator generators
# (hack/tools/cdi/cmd/cdi-static-resources), crds/ (a link to the CRDs of
# hack/build-cdi.sh), `images` (one line per image: name, reference,
# tarball) and BUILD-INFO (times and sizes).
#
# Cached by content outside the clone in ~/.cache/vm-migration/cdi-images
# (CDI_IMAGES_CACHE overrides): each root file system by its package list,
# the apt lists and this script; the images by that, the CDI build folder,
# hack/cdiimage and ociimage, the generator and the Go version. One build at
# a time (a lock); entries unused for 14 days are removed. The script prints
# the cache folder on its last line and points _output/cdi-images at it.
#
# Needs root (mmdebstrap in root mode); installs mmdebstrap when missing.
# Runs hack/build-cdi.sh first (cached; about 19 minutes cold).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
start=$SECONDS
say() { echo "cdi-images: $*" >&2; }
fail() {
  say "$*"
  exit 1
}

module=kubevirt.io/containerized-data-importer
tools="$root/hack/tools/cdi"
suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
arch=$(dpkg --print-architecture)
cache=${CDI_IMAGES_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vm-migration/cdi-images}
repo=platform.example/vm-migration

# The Debian packages of each image with a root file system (mmdebstrap's
# essential variant brings bash, coreutils, tar, util-linux, dash).
declare -A packages=(
  [importer]="qemu-utils nbdkit ca-certificates"
  [cloner]=""
  [uploadserver]="qemu-utils"
)

# apt_indices, read_indices
. "$root/hack/lib/apt-indices.sh"
# bootstrap_rootfs, pack_rootfs
. "$root/hack/lib/debian-rootfs.sh"
if ! read_indices; then
  [ "$(id -u)" = 0 ] || fail "no complete Debian package index for $suite/$arch in the apt lists; as root this script runs apt-get update itself"
  apt-get update -q >&2
  read_indices || fail "no Debian package index for $suite/$arch after apt-get update"
fi
epoch=0
for r in "${lists[@]}"; do
  [[ $r == *InRelease ]] || continue
  d=$(date -d "$(sed -n 's/^Date: //p' "$r" | head -n 1)" +%s)
  [ "$d" -gt "$epoch" ] && epoch=$d
done
export SOURCE_DATE_EPOCH=$epoch

# rootfs <name> makes (or finds) the root file system tar of one image and
# prints its path.
rootfs() {
  local name=$1 key rdir work t=$SECONDS
  key=$(rootfs_key "$name")
  rdir="$cache/rootfs-$name-$key"
  if [ ! -f "$rdir/rootfs.tar" ]; then
    work="$rdir.tmp"
    rm -rf "$work"
    mkdir -p "$work"
    say "bootstrapping the $name root file system: $suite with ${packages[$name]:-nothing more than essential} (log: $work/mmdebstrap.log)"
    if ! bootstrap_rootfs "$work/mmdebstrap.log" "${packages[$name]}" --skip=update \
      --setup-hook='mkdir -p "$1/var/lib/apt/lists"' \
      --setup-hook="copy-in ${lists[*]} /var/lib/apt/lists/" \
      --customize-hook='echo "cdi:x:1001:1001:cdi:/home/cdi:/bin/bash" >>"$1/etc/passwd"; echo "cdi:x:1001:" >>"$1/etc/group"' \
      --customize-hook='mkdir -p "$1/home/cdi" "$1/home/cdi-cloner" && chown 1001:1001 "$1/home/cdi" "$1/home/cdi-cloner"' \
      --customize-hook='[ -e "$1/usr/bin/tar" ] || ln -s /bin/tar "$1/usr/bin/tar"' \
      "$suite" "$work/rootfs" "${sources[@]}"; then
      fail "mmdebstrap failed for $name (the whole log is $work/mmdebstrap.log)"
    fi
    pack_rootfs "$work/rootfs" "$work/rootfs.tar" "$SOURCE_DATE_EPOCH"
    chroot "$work/rootfs" dpkg-query -W -f '${Package}\n' | wc -l >"$work/packages.count"
    rm -rf "$work/rootfs"
    echo "$((SECONDS - t))" >"$work/bootstrap.seconds"
    rm -rf "$rdir"
    mv "$work" "$rdir"
  fi
  echo "$rdir"
}

lists_sum=$(sha256sum "${lists[@]}" | cut -d' ' -f1 | sha256sum | cut -c1-16)
script_sum=$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-16)
# A root file system's key: the release, its package list, the apt lists
# and the recipe (the rootfs function's own text).
rootfs_key() { (printf '%s\n' "$suite" "$arch" "$1" "${packages[$1]}" "$lists_sum"; declare -f rootfs bootstrap_rootfs pack_rootfs) | sha256sum | cut -c1-16; }
# lock takes the cache's build lock (once; root only past this point).
locked=
lock() {
  [ -n "$locked" ] && return 0
  [ "$(id -u)" = 0 ] || fail "building CDI's images needs root (mmdebstrap in root mode); the cache lacks some for this key"
  "$root/hack/install-debian-packages.sh" mmdebstrap >&2
  mkdir -p "$cache"
  exec 9>"$cache/.lock"
  say "waiting for the build lock $cache/.lock"
  flock 9
  locked=1
  # Under the lock, a *.tmp is what a failed or killed build left.
  find "$cache" -mindepth 1 -maxdepth 1 -type d \( -name '*.tmp' -o -mtime +14 \) -exec rm -rf {} +
}

# The root file systems first: they do not depend on CDI's binaries, so
# they build while hack/build-cdi.sh may still be building.
for name in importer cloner uploadserver; do
  [ -f "$cache/rootfs-$name-$(rootfs_key "$name")/rootfs.tar" ] || {
    lock
    rootfs "$name" >/dev/null
  }
done

cdi_dir=$("$root/hack/build-cdi.sh" | tail -n 1)
[ -x "$cdi_dir/cdi-importer" ] || fail "hack/build-cdi.sh gave no CDI build folder (it printed $cdi_dir)"
cdi_version=$(sed -n 's/^cdi //p' "$cdi_dir/BUILD-INFO")
image_key=$( (echo "$cdi_dir" "$script_sum" "$lists_sum" "$repo"; go version
  for n in importer cloner uploadserver; do rootfs_key "$n"; done
  for f in "$root"/hack/cdiimage/*.go "$root"/hack/image/ociimage/*.go "$tools"/cmd/cdi-static-resources/*.go; do
    [[ $f == *_test.go ]] || cat "$f"
  done
  grep go-containerregistry "$root/go.sum") | sha256sum | cut -c1-16)
dir="$cache/${cdi_version}-${image_key}"

finish() {
  local n
  touch "$dir"
  for n in importer cloner uploadserver; do touch "$cache/rootfs-$n-$(rootfs_key "$n")" 2>/dev/null || true; done
  mkdir -p "$root/_output"
  ln -sfn "$dir" "$root/_output/cdi-images"
  sed 's/^/  /' "$dir/BUILD-INFO" >&2
  echo "$dir"
}
[ -s "$dir/BUILD-INFO" ] && {
  finish
  exit 0
}

lock
[ -s "$dir/BUILD-INFO" ] && {
  finish
  exit 0
}

info=()

rm -rf "$dir.tmp"
mkdir -p "$dir.tmp"
# pack <name> [cdiimage flags...] packages image cdi-<name>.
pack() {
  local name=$1 t=$SECONDS
  shift
  local ref="$repo/cdi-$name:$cdi_version"
  (cd "$root" && go run ./hack/cdiimage -image "$ref" -out "$dir.tmp/cdi-$name.tar" \
    -source-date-epoch "$SOURCE_DATE_EPOCH" -user 1001 "$@")
  echo "$name $ref cdi-$name.tar" >>"$dir.tmp/images"
  info+=("cdi-$name $(($(stat -c %s "$dir.tmp/cdi-$name.tar") >> 20)) MiB, packed in $((SECONDS - t))s")
}

src=$(cd "$tools" && go list -mod=readonly -m -f '{{.Dir}}' "$module")
for name in importer cloner uploadserver; do
  rdir=$(rootfs "$name")
  info+=("rootfs-$name $(cat "$rdir/packages.count") packages, $(($(stat -c %s "$rdir/rootfs.tar") >> 20)) MiB, bootstrapped in $(cat "$rdir/bootstrap.seconds")s")
done
pack importer -rootfs "$(rootfs importer)/rootfs.tar" -file "/usr/bin/cdi-importer=$cdi_dir/cdi-importer" \
  -file "/usr/bin/cdi-image-size-detection=$cdi_dir/cdi-image-size-detection" -dir /tmp=1777 -entrypoint /usr/bin/cdi-importer,-alsologtostderr
pack cloner -rootfs "$(rootfs cloner)/rootfs.tar" -file "/usr/bin/cdi-cloner=$cdi_dir/cdi-cloner" \
  -file "/usr/bin/cloner_startup.sh=$src/cmd/cdi-cloner/cloner_startup.sh" \
  -dir /tmp=1777 -entrypoint /usr/bin/cloner_startup.sh -workdir /home/cdi-cloner
pack uploadserver -rootfs "$(rootfs uploadserver)/rootfs.tar" -file "/usr/bin/cdi-uploadserver=$cdi_dir/cdi-uploadserver" \
  -dir /tmp=1777 -entrypoint /usr/bin/cdi-uploadserver,-alsologtostderr

# Debian's static busybox, for the controller's `cat` (no libc needed).
bb="$dir.tmp/busybox"
mkdir -p "$bb"
(cd "$bb" && apt-get download -q -o APT::Sandbox::User=root busybox-static >&2 && dpkg-deb -x busybox-static_*.deb x)
[ -x "$bb/x/bin/busybox" ] || fail "busybox-static has no /bin/busybox"
pack controller -file "/usr/bin/cdi-controller=$cdi_dir/cdi-controller" -file "/usr/bin/busybox=$bb/x/bin/busybox" \
  -link /usr/bin/cat=busybox -dir /tmp=1777 -dir /home/cdi-controller -entrypoint /usr/bin/cdi-controller,-alsologtostderr -workdir /home/cdi-controller
info+=("  with busybox-static $(dpkg-deb -f "$bb"/busybox-static_*.deb Version)")
rm -rf "$bb"
pack apiserver -file "/usr/bin/cdi-apiserver=$cdi_dir/cdi-apiserver" -dir /tmp=1777 \
  -dir /home/cdi-apiserver -entrypoint /usr/bin/cdi-apiserver,-alsologtostderr -workdir /home/cdi-apiserver
pack uploadproxy -file "/usr/bin/cdi-uploadproxy=$cdi_dir/cdi-uploadproxy" -dir /tmp=1777 \
  -dir /home/cdi-uploadproxy -entrypoint /usr/bin/cdi-uploadproxy,-alsologtostderr -workdir /home/cdi-uploadproxy

say "generating CDI's static resources with its operator generators"
t=$SECONDS
(cd "$tools" && go run -mod=readonly ./cmd/cdi-static-resources -namespace cdi -out "$dir.tmp/resources")
info+=("resources $(ls "$dir.tmp/resources" | tr '\n' ' ')in $((SECONDS - t))s")
ln -sfn "$cdi_dir/crds" "$dir.tmp/crds"

{
  echo "cdi $cdi_version from $cdi_dir"
  echo "suite $suite, SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) in $((SECONDS - start))s"
  printf '%s\n' "${info[@]}"
} >"$dir.tmp/BUILD-INFO"
rm -rf "$dir"
mv "$dir.tmp" "$dir"
say "built in $((SECONDS - start))s"
finish
