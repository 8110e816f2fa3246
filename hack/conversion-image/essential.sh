#!/bin/sh
# mmdebstrap essential hook of build.sh: the image boots no kernel of its
# own (libguestfs' fixed appliance has its own initrd, made by supermin),
# so the kernel package's initramfs is not generated: update-initramfs is
# diverted before initramfs-tools is installed and replaced by a no-op.
set -eu
root=$1
chroot "$root" dpkg-divert --quiet --local --rename \
	--divert /usr/sbin/update-initramfs.distrib --add /usr/sbin/update-initramfs
mkdir -p "$root/usr/sbin"
printf '#!/bin/sh\n# conversion image: no initramfs (see hack/conversion-image/essential.sh)\nexit 0\n' \
	>"$root/usr/sbin/update-initramfs"
chmod 0755 "$root/usr/sbin/update-initramfs"
