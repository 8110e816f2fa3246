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

# virt-v2v's recommended packages are part of a working conversion.
WITH_RECOMMENDS=1 exec "$(dirname "${BASH_SOURCE[0]}")/install-debian-packages.sh" "${packages[@]}"
