#!/usr/bin/env bash
# make conversion-image: the virt-v2v image of the conversion Jobs, built
# from Debian packages without a container engine.
#
#   1. a root file system made by mmdebstrap from the machine's own Debian
#      release and apt sources (bookworm on Debian 12), with exactly the
#      package versions of the machine's apt lists (copied in; mmdebstrap
#      does not update them), holding virt-v2v (virt-v2v-in-place), nbdkit,
#      libguestfs with a fixed appliance built here (customize.sh boots it
#      once under TCG), qemu, OVMF, /bin/sh, the user and group 107 and the
#      self-check /usr/local/bin/v2v-self-check; docs, man pages, locales
#      and apt lists left out;
#   2. packed as a sorted tar with numeric owners and mtimes clamped to
#      SOURCE_DATE_EPOCH (the newest Date of the apt lists used), then
#      packaged by hack/image (go-containerregistry) as an OCI image with
#      an SPDX SBOM of the Debian packages inside (from the rootfs' dpkg
#      status).
#
# Outputs, in the directory _output/conversion-image links to:
#   oci/                          the OCI image layout
#   vm-migration-conversion.tar   a tarball `ctr -n k8s.io images import`
#                                 (and docker/podman load) accept
#   sbom.spdx.json                the SBOM (also inside the image)
#   build.env                     key, sizes, build times
# and the image reference on the last line of its output.
#
# Cached by content in ~/.cache/vm-migration/conversion-image (CONVERSION_IMAGE_CACHE
# overrides): the root file system by the package list, the apt lists
# (every package's version), this script and its hooks and the release; the
# image by that, hack/image's sources, the Go version, IMAGE and VERSION.
# A second run with the same key takes about a second. One build at a time
# (a lock); entries unused for 14 days are removed.
#
# Needs root (mmdebstrap in root mode, a chroot to build the appliance); it
# installs mmdebstrap when missing (hack/install-debian-packages.sh) and,
# when the machine has no apt lists, runs apt-get update first; 5-7 minutes cold on 2 busy cores (mostly mmdebstrap, then
# about 2 minutes of packaging), a second or less warm.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
here="$root/hack/conversion-image"
version=${VERSION:-dev}
image=${IMAGE:-platform.example/vm-migration-conversion:$version}
suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
arch=$(dpkg --print-architecture)
cache=${CONVERSION_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vm-migration/conversion-image}
# What the image holds (and their dependencies): virt-v2v-in-place; nbdkit,
# which its -i libvirtxml needs and the package does not pull in;
# libguestfs-tools for libguestfs-make-fixed-appliance and guestfish (the
# KVM probe); the kernel the appliance boots; qemu; OVMF for UEFI guests.
packages=(virt-v2v nbdkit libguestfs-tools guestfish linux-image-amd64 qemu-system-x86 qemu-utils ovmf)

say() { echo "conversion-image: $*" >&2; }
fail() { say "$*"; exit 1; }

# apt_indices, read_indices
. "$root/hack/lib/apt-indices.sh"
if ! read_indices; then
  [ "$(id -u)" = 0 ] || fail "the machine's apt lists have no complete Debian package index for $suite/$arch; as root this script runs apt-get update itself"
  say "the machine's apt lists have no complete index for $suite/$arch: apt-get update"
  apt-get update -q >&2
  read_indices || fail "no Debian package index for $suite/$arch in the machine's apt lists after apt-get update (check /etc/apt/sources.list*)"
fi

# SOURCE_DATE_EPOCH: the newest Date of the releases (a property of the
# package versions, not of the machine or the hour).
epoch=0
for r in "${lists[@]}"; do
  [[ $r == *InRelease ]] || continue
  d=$(date -d "$(sed -n 's/^Date: //p' "$r" | head -n 1)" +%s)
  [ "$d" -gt "$epoch" ] && epoch=$d
done
export SOURCE_DATE_EPOCH=$epoch

rootfs_key=$( (printf '%s\n' "$suite" "$arch" "${packages[@]}"
  for f in build.sh essential.sh customize.sh v2v-self-check; do echo "$f"; cat "$here/$f"; done
  sha256sum "${lists[@]}" | cut -d' ' -f1) | sha256sum | cut -c1-16)
image_key=$( (echo "$rootfs_key" "$image" "$version"; go version
  for f in "$root"/hack/image/*.go; do [[ $f == *_test.go ]] || { echo "${f##*/}"; cat "$f"; }; done
  grep go-containerregistry "$root/go.sum") | sha256sum | cut -c1-16)
rootfs_dir="$cache/rootfs-$rootfs_key"
image_dir="$cache/image-$image_key"

finish() {
  touch "$image_dir" "$rootfs_dir"
  mkdir -p "$root/_output"
  ln -sfn "$image_dir" "$root/_output/conversion-image"
  sed 's/^/  /' "$image_dir/build.env" >&2
  say "OCI layout $image_dir/oci, tarball $image_dir/vm-migration-conversion.tar (ctr -n k8s.io images import accepts it)"
  echo "$image"
}

[ -f "$image_dir/build.env" ] && { finish; exit 0; }

[ "$(id -u)" = 0 ] || fail "building the conversion image needs root (mmdebstrap in root mode); the cache has no image for key $image_key"
"$root/hack/install-debian-packages.sh" mmdebstrap >&2
mkdir -p "$cache"
exec 9>"$cache/.lock"
say "waiting for the build lock $cache/.lock"
flock 9
[ -f "$image_dir/build.env" ] && { finish; exit 0; }
# Under the lock, a *.tmp is what a failed or killed build left.
find "$cache" -mindepth 1 -maxdepth 1 -type d \( -name '*.tmp' -o -mtime +14 \) -exec rm -rf {} +

start=$SECONDS
if [ ! -f "$rootfs_dir/rootfs.tar" ]; then
  work="$rootfs_dir.tmp"
  rm -rf "$work"
  mkdir -p "$work"
  say "bootstrapping $suite with ${packages[*]} from ${sources[*]} (3-5 minutes; log: $work/mmdebstrap.log)"
  # The lists are copied in before the package selection, so that the
  # versions are the key's; mmdebstrap removes them again at its cleanup.
  if ! mmdebstrap --variant=essential --mode=root --format=directory --skip=update \
    --include="$(
      IFS=,
      echo "${packages[*]}"
    )" \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias' \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/lintian/*' --dpkgopt='path-exclude=/usr/share/bash-completion/*' \
    --essential-hook="$here/essential.sh" \
    --setup-hook='mkdir -p "$1/var/lib/apt/lists"' \
    --setup-hook="copy-in ${lists[*]} /var/lib/apt/lists/" \
    --customize-hook="$here/customize.sh" \
    "$suite" "$work/rootfs" "${sources[@]}" >"$work/mmdebstrap.log" 2>&1; then
    tail -n 30 "$work/mmdebstrap.log" >&2
    fail "mmdebstrap failed (the whole log is $work/mmdebstrap.log; the next build removes it)"
  fi
  bootstrap=$((SECONDS - start))
  # apt leaves its partial directories to _apt only where _apt could reach
  # the build directory: the same owner either way.
  chroot "$work/rootfs" chown _apt:root /var/cache/apt/archives/partial /var/lib/apt/lists/partial 2>/dev/null || true
  # A sorted tar of the top-level entries (no "./"), numeric owners, mtimes
  # clamped; /dev stays an empty directory (the runtime mounts one).
  (cd "$work/rootfs" && find . -mindepth 1 -maxdepth 1 -printf '%P\n' | LC_ALL=C sort |
    tar --create --file "$work/rootfs.tar" --sort=name --numeric-owner --format=pax \
      --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
      --mtime="@$SOURCE_DATE_EPOCH" --clamp-mtime --anchored --exclude='dev/*' --files-from=-)
  du -s --apparent-size --block-size=1M "$work/rootfs" | cut -f1 >"$work/rootfs.mib"
  rm -rf "$work/rootfs"
  echo "$bootstrap" >"$work/bootstrap.seconds"
  rm -rf "$rootfs_dir"
  mv "$work" "$rootfs_dir"
fi

say "packaging $image with hack/image (go-containerregistry)"
pack=$SECONDS
rm -rf "$image_dir.tmp"
(cd "$root" && go run ./hack/image --rootfs "$rootfs_dir/rootfs.tar" --out "$image_dir.tmp" \
  --image "$image" --version "$version" --source-date-epoch "$SOURCE_DATE_EPOCH" >&2)
cat >"$image_dir.tmp/build.env" <<EOF
IMAGE=$image
ROOTFS_KEY=$rootfs_key
IMAGE_KEY=$image_key
SUITE=$suite
SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH
ROOTFS_MIB=$(cat "$rootfs_dir/rootfs.mib")
ROOTFS_TAR_MIB=$(($(stat -c %s "$rootfs_dir/rootfs.tar") >> 20))
IMAGE_TARBALL_MIB=$(($(stat -c %s "$image_dir.tmp/vm-migration-conversion.tar") >> 20))
BUILD_SECONDS_BOOTSTRAP=$(cat "$rootfs_dir/bootstrap.seconds")
BUILD_SECONDS_PACKAGE=$((SECONDS - pack))
EOF
rm -rf "$image_dir"
mv "$image_dir.tmp" "$image_dir"
say "built in $((SECONDS - start))s"
finish
