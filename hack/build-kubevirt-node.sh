#!/usr/bin/env bash
# make kubevirt-node: KubeVirt's node side, built here from the Go module
# proxy and Debian packages, never pulled, for the test node:
#
#   virt-handler    virt-handler (cgo: linux/kvm.h only) and virt-chroot on
#                   Debian's nftables, iproute2, procps and qemu-utils;
#                   the user and group qemu (107) as upstream's image has
#                   them; entrypoint /usr/bin/virt-handler
#   virt-launcher   virt-launcher (cgo against libvirt), virt-launcher-monitor
#                   (file capability cap_net_bind_service+ep, as upstream
#                   sets it: the DHCP server of a masquerade interface
#                   binds port 67 as user 107), virt-probe, virt-tail,
#                   virt-freezer and KubeVirt's node-labeller.sh, qemu.conf,
#                   virtqemud.conf, nsswitch.conf and qemu hook (copied from
#                   the module cache at build time) on the libvirt, QEMU,
#                   OVMF, SeaBIOS, passt and nftables of the Debian release
#                   in $KUBEVIRT_NODE_SUITE (default trixie: libvirt 11.3,
#                   QEMU 10.0); entrypoint /usr/bin/virt-launcher
#
# Debian builds libvirt without its modular daemons: no release ships
# /usr/sbin/virtqemud, which virt-launcher (since KubeVirt v1.1) and
# node-labeller.sh start. The image's /usr/sbin/virtqemud is therefore a
# two-line script that starts Debian's libvirtd, the monolithic daemon
# with the same QEMU driver (libvirt_driver_qemu.so) and the same
# configuration keys, and links virtqemud-sock, the socket name
# virt-launcher dials as a non-root user, to libvirtd's libvirt-sock.
# OVMF_CODE.fd and friends, the names KubeVirt looks for, link to Debian's
# 4M images. /var/run is a relative link (../run), as upstream's image
# has it: virt-handler reaches the launcher's sockets through
# /proc/<pid>/root/var/run.
#
# The binaries come from the tools module hack/tools/kubevirt at the
# version hack/build-kubevirt.sh builds (it runs first: its folder gives
# the version, and node/, virt-handler's DaemonSet from virt-operator's
# generator). Each image is a Debian root file system made by mmdebstrap
# (variant essential, packed as a sorted tar with clamped mtimes), a
# second prepared layer with KubeVirt's files (GNU tar, so that the file
# capability stays in its extended attributes) and the config, packaged by
# hack/cdiimage (go-containerregistry). `images` lists them (name,
# reference, tarball) for the node to import.
#
# Cached by content outside the clone in ~/.cache/vm-migration/kubevirt-node
# (KUBEVIRT_NODE_CACHE overrides): the root file systems by their package
# lists, release and this script; the rest by that, the control plane's
# folder, the tools module, hack/cdiimage and the Go version. One build at
# a time (a lock). The script prints the folder on its last line and points
# _output/kubevirt-node at it.
#
# Needs root (mmdebstrap in root mode), gcc, libvirt-dev and setcap (installed when
# missing). Cold: about 10 minutes for the binaries (virt-launcher the
# longest) and 7 for the launcher's root file system on 2 cores.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
start=$SECONDS
say() { echo "kubevirt-node: $*" >&2; }
fail() {
  say "$*"
  exit 1
}

tools="$root/hack/tools/kubevirt"
module=kubevirt.io/kubevirt
suite=${KUBEVIRT_NODE_SUITE:-trixie}
arch=$(dpkg --print-architecture)
cache=${KUBEVIRT_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vm-migration/kubevirt-node}
# The Debian mirror: the machine's own (its apt sources), the release
# $suite instead of the machine's.
mirror=$(apt-get indextargets --format '$(BASE_URI)' 'Identifier: Packages' 'Origin: Debian' "Architecture: $arch" 2>/dev/null |
  sed -n 's#/dists/.*##p' | grep -v -- '-security$' | head -n 1)
mirror=${KUBEVIRT_NODE_MIRROR:-${mirror:-http://deb.debian.org/debian}}

# bootstrap_rootfs, pack_rootfs
. "$root/hack/lib/debian-rootfs.sh"
# take_build_lock
. "$root/hack/lib/upstream-build.sh"

declare -A packages=(
  [handler]="nftables iproute2 procps qemu-utils"
  [launcher]="libvirt-daemon libvirt-daemon-driver-qemu libvirt-daemon-log libvirt-clients qemu-system-x86 qemu-utils ovmf seabios ipxe-qemu passt nftables iproute2 procps dmidecode"
)

script_sum=$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-16)
# A root file system's key: the release, its package list and the recipe
# (the rootfs function's own text).
rootfs_key() { (printf '%s\n' "$suite" "$arch" "$1" "${packages[$1]}"; declare -f rootfs bootstrap_rootfs pack_rootfs) | sha256sum | cut -c1-16; }

# rootfs <name> makes (or finds) the root file system tar of one image and
# prints its folder (rootfs.tar, packages: name and version of each).
rootfs() {
  local name=$1 rdir work t=$SECONDS
  rdir="$cache/rootfs-$name-$(rootfs_key "$name")"
  if [ ! -f "$rdir/rootfs.tar" ]; then
    work="$rdir.tmp"
    rm -rf "$work"
    mkdir -p "$work"
    say "bootstrapping the $name root file system: $suite from $mirror with ${packages[$name]} (log: $work/mmdebstrap.log)"
    bootstrap_rootfs "$work/mmdebstrap.log" "${packages[$name]}" \
      --customize-hook='chroot "$1" dpkg-query -W -f "\${Package} \${Version}\n" >"$1/.packages"' \
      "$suite" "$work/rootfs" "deb $mirror $suite main" ||
      fail "mmdebstrap failed for $name (the whole log is $work/mmdebstrap.log)"
    mv "$work/rootfs/.packages" "$work/packages"
    local epoch
    epoch=$(stat -c %Y "$work/rootfs/var/lib/dpkg/status")
    pack_rootfs "$work/rootfs" "$work/rootfs.tar" "$epoch"
    echo "$epoch" >"$work/epoch"
    rm -rf "$work/rootfs"
    echo "$((SECONDS - t))" >"$work/bootstrap.seconds"
    rm -rf "$rdir"
    mv "$work" "$rdir"
  fi
  echo "$rdir"
}

# lock takes the cache's build lock (one build at a time; root only past
# this point) and removes what failed or old builds left.
lock() {
  [ "$(id -u)" = 0 ] || fail "building KubeVirt's node images needs root (mmdebstrap in root mode)"
  "$root/hack/install-debian-packages.sh" mmdebstrap libvirt-dev gcc libcap2-bin >&2
  take_build_lock "$cache" "KubeVirt node"
  find "$cache" -mindepth 1 -maxdepth 1 -type d \( -name '*.tmp' -o -mtime +14 \) -exec rm -rf {} +
}

cp_dir=$("$root/hack/build-kubevirt.sh" | tail -n 1)
[ -s "$cp_dir/node/00-daemonset-virt-handler.yaml" ] || fail "hack/build-kubevirt.sh left no node/ DaemonSet in $cp_dir"
kv_version=$(sed -n 's/^kubevirt //p' "$cp_dir/BUILD-INFO")
key=$( (echo "$cp_dir" "$script_sum"; go version; rootfs_key handler; rootfs_key launcher
  cat "$tools/go.mod" "$tools/go.sum" "$root"/hack/tools/cdi/libnbd/*.go
  for f in "$root"/hack/cdiimage/*.go "$root"/hack/image/ociimage/*.go; do [[ $f == *_test.go ]] || cat "$f"; done) |
  sha256sum | cut -c1-16)
dir="$cache/${kv_version}-${key}"

finish() {
  touch "$dir"
  mkdir -p "$root/_output"
  ln -sfn "$dir" "$root/_output/kubevirt-node"
  sed 's/^/  /' "$dir/BUILD-INFO" >&2
  echo "$dir"
}
if [ -s "$dir/BUILD-INFO" ]; then
  finish
  exit 0
fi
lock
if [ -s "$dir/BUILD-INFO" ]; then
  finish
  exit 0
fi

rm -rf "$dir.tmp"
mkdir -p "$dir.tmp/bin"
info=()

# The binaries, stamped as hack/build-kubevirt.sh stamps the control
# plane's (the same version package and values).
vpkg=kubevirt.io/client-go/version
mod_time=$(cd "$tools" && go list -mod=readonly -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' "$module")
commit=$(cd "$tools" && go mod download -json "$module@$kv_version" | sed -n 's/^[[:space:]]*"Hash": "\([0-9a-f]\{40\}\)".*/\1/p' | head -n1)
ldflags="-s -w -X $vpkg.gitVersion=$kv_version -X $vpkg.gitTreeState=clean -X $vpkg.buildDate=$mod_time -X $vpkg.gitCommit=${commit:-unknown}"
build() {
  local bin=$1 cgo=$2 t=$SECONDS
  (cd "$tools" && CGO_ENABLED=$cgo go build -mod=readonly -trimpath -ldflags "$ldflags" -o "$dir.tmp/bin/$bin" "$module/cmd/$bin")
  go version -m "$dir.tmp/bin/$bin" | grep -qE "^[[:space:]]+mod[[:space:]]+$module[[:space:]]+$kv_version[[:space:]]" ||
    fail "$bin is not a build of $module $kv_version"
  info+=("$bin $((SECONDS - t))s $(($(stat -c %s "$dir.tmp/bin/$bin") >> 20)) MiB")
  say "built $bin in $((SECONDS - t))s"
}
say "building KubeVirt $kv_version's node binaries (virt-launcher links libvirt: many minutes cold)"
build virt-handler 1
build virt-launcher 1
for b in virt-chroot virt-launcher-monitor virt-probe virt-tail virt-freezer; do build "$b" 0; done

src=$(cd "$tools" && go list -mod=readonly -m -f '{{.Dir}}' "$module")
epoch=$(date -u -d "$mod_time" +%s)

# layer <name> packs the staging folder $dir.tmp/<name> as a prepared
# layer: sorted, numeric owners, the module's time, extended attributes
# (the file capability) kept.
layer() {
  (cd "$dir.tmp/$1" && find . -mindepth 1 -maxdepth 1 -printf '%P\n' | LC_ALL=C sort |
    tar --create --file "$dir.tmp/$1.tar" --sort=name --numeric-owner --format=pax --xattrs --xattrs-include='security.capability' \
      --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime --mtime="@$epoch" --anchored --files-from=-)
  rm -rf "$dir.tmp/$1"
}
# qemu_user adds the user and group qemu (107), KubeVirt's non-root user,
# to the staged /etc/passwd and /etc/group of root file system $2.
qemu_user() {
  local stage=$1 rootfs_tar=$2
  mkdir -p "$stage/etc"
  tar -xf "$rootfs_tar" -C "$stage" etc/passwd etc/group
  grep -q '^[^:]*:[^:]*:107:' "$stage/etc/group" && fail "group 107 is taken in the $suite root file system"
  grep -q '^[^:]*:[^:]*:107:' "$stage/etc/passwd" && fail "user 107 is taken in the $suite root file system"
  echo "qemu:x:107:107:qemu:/home/qemu:/bin/bash" >>"$stage/etc/passwd"
  echo "qemu:x:107:" >>"$stage/etc/group"
  install -d -o 107 -g 107 "$stage/home/qemu"
}

# virt-handler's image.
h=$(rootfs handler)
s="$dir.tmp/handler"
install -D -m 0755 "$dir.tmp/bin/virt-handler" "$s/usr/bin/virt-handler"
install -D -m 0755 "$dir.tmp/bin/virt-chroot" "$s/usr/bin/virt-chroot"
install -D -m 0644 "$src/cmd/virt-handler/nsswitch.conf" "$s/etc/nsswitch.conf"
qemu_user "$s" "$h/rootfs.tar"
layer handler

# virt-launcher's image.
l=$(rootfs launcher)
s="$dir.tmp/launcher"
for b in virt-launcher virt-launcher-monitor virt-probe virt-tail virt-freezer; do
  install -D -m 0755 "$dir.tmp/bin/$b" "$s/usr/bin/$b"
done
setcap cap_net_bind_service+ep "$s/usr/bin/virt-launcher-monitor"
install -D -m 0755 "$src/cmd/virt-launcher/node-labeller/node-labeller.sh" "$s/usr/bin/node-labeller.sh"
install -D -m 0644 "$src/cmd/virt-launcher/qemu.conf" "$s/etc/libvirt/qemu.conf"
install -D -m 0644 "$src/cmd/virt-launcher/virtqemud.conf" "$s/etc/libvirt/virtqemud.conf"
install -D -m 0644 "$src/cmd/virt-launcher/nsswitch.conf" "$s/etc/nsswitch.conf"
install -D -m 0755 -o 107 -g 107 "$src/cmd/virt-launcher/qemu" "$s/etc/libvirt/hooks/qemu"
mkdir -p "$s/usr/sbin"
cat >"$s/usr/sbin/virtqemud" <<'EOF'
#!/bin/sh
# Debian ships no modular daemons: libvirtd serves the QEMU driver in
# virtqemud's place (hack/build-kubevirt-node.sh). Its socket is
# libvirt-sock in the same folder; virt-launcher dials virtqemud-sock.
dir=${XDG_RUNTIME_DIR:-/run}/libvirt
[ "$(id -u)" = 0 ] && dir=/run/libvirt
mkdir -p "$dir" && ln -sfn libvirt-sock "$dir/virtqemud-sock"
exec /usr/sbin/libvirtd "$@"
EOF
chmod 0755 "$s/usr/sbin/virtqemud"
mkdir -p "$s/usr/share/OVMF" "$s/var"
for pair in OVMF_CODE.fd=OVMF_CODE_4M.fd OVMF_VARS.fd=OVMF_VARS_4M.fd \
  OVMF_CODE.secboot.fd=OVMF_CODE_4M.ms.fd OVMF_VARS.secboot.fd=OVMF_VARS_4M.ms.fd; do
  tar -tf "$l/rootfs.tar" "usr/share/OVMF/${pair#*=}" >/dev/null 2>&1 || fail "the $suite root file system has no /usr/share/OVMF/${pair#*=}"
  ln -s "${pair#*=}" "$s/usr/share/OVMF/${pair%=*}"
done
ln -s ../run "$s/var/run"
# libvirtd logs there when node-labeller.sh starts it as a daemon (the
# root file system's /var/log is emptied).
install -d "$s/var/log/libvirt/qemu"
qemu_user "$s" "$l/rootfs.tar"
layer launcher

pack() {
  local name=$1 rdir=$2 t=$SECONDS
  shift 2
  local ref="localhost/kubevirt/$name:$kv_version"
  grep -q "image: $ref\$" "$cp_dir/node/00-daemonset-virt-handler.yaml" ||
    fail "virt-handler's DaemonSet of $cp_dir/node does not name $ref"
  (cd "$root" && go run ./hack/cdiimage -image "$ref" -rootfs "$rdir/rootfs.tar" -layer "$dir.tmp/${name#virt-}.tar" \
    -out "$dir.tmp/$name.tar" -source-date-epoch "$epoch" -user 0 "$@")
  rm -f "$dir.tmp/${name#virt-}.tar"
  echo "$name $ref $name.tar" >>"$dir.tmp/images"
  info+=("$name $ref: $(($(stat -c %s "$dir.tmp/$name.tar") >> 20)) MiB, $(wc -l <"$rdir/packages") Debian packages ($suite, bootstrapped in $(cat "$rdir/bootstrap.seconds")s), packed in $((SECONDS - t))s")
}
pack virt-handler "$h" -entrypoint /usr/bin/virt-handler
pack virt-launcher "$l" -entrypoint /usr/bin/virt-launcher
cp "$h/packages" "$dir.tmp/handler-packages"
cp "$l/packages" "$dir.tmp/launcher-packages"
ln -sfn "$cp_dir/node" "$dir.tmp/node"

{
  echo "kubevirt $kv_version (control plane $cp_dir)"
  echo "suite $suite from $mirror: $(grep -E '^(libvirt-daemon|qemu-system-x86|ovmf) ' "$l/packages" | tr '\n' ' ')"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) in $((SECONDS - start))s"
  printf '%s\n' "${info[@]}"
} >"$dir.tmp/BUILD-INFO"
rm -rf "$dir.tmp/bin" "$dir"
mv "$dir.tmp" "$dir"
say "built in $((SECONDS - start))s"
finish
