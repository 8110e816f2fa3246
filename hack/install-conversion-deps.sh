#!/usr/bin/env bash
# Installs, when missing, the Debian packages the real guest conversion
# tests need (make test-conversion): virt-v2v (virt-v2v-in-place), nbdkit
# (virt-v2v's -i libvirtxml needs it, the package does not pull it in),
# libguestfs-tools (guestfish), a kernel in /boot for libguestfs'
# appliance, qemu and OVMF for the boot check, and mmdebstrap for the
# guest images. As root it runs apt-get update once, then installs what is
# missing; otherwise it names what is missing and fails.
set -euo pipefail

packages=(virt-v2v nbdkit libguestfs-tools linux-image-amd64 qemu-system-x86 qemu-utils ovmf mmdebstrap)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "missing Debian packages: ${missing[*]}; install them as root (apt-get install -y ${missing[*]})" >&2
  exit 1
fi
echo "installing ${missing[*]} (several minutes on a fresh machine)" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q "${missing[@]}"
