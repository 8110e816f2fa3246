#!/bin/sh
# mmdebstrap customize hook of build.sh: makes the bootstrapped tree ($1)
# the conversion image's root file system (docs/operators/conversion-image.md).
set -eu
root=$1
here=$(dirname "$0")
appliance=/usr/local/lib/guestfs/appliance
uid=107

say() { echo "conversion-image customize: $*" >&2; }

# Reproducible and free of the build machine: mmdebstrap pasted in its
# hostname, resolver and apt sources (the runtime provides the first two;
# the image installs nothing).
echo conversion >"$root/etc/hostname"
rm -f "$root/etc/resolv.conf" "$root/etc/apt/sources.list"
find "$root/etc/apt/sources.list.d" -type f \( -name '*.list' -o -name '*.sources' \) -delete 2>/dev/null || true

# The kernel modules of hardware no VM has: neither the appliance nor
# anything else in the image loads them.
for kernel in "$root"/lib/modules/*; do
	for m in drivers/gpu drivers/media drivers/net/wireless drivers/net/ethernet drivers/infiniband \
		drivers/staging drivers/bluetooth drivers/isdn drivers/iio drivers/hwmon drivers/mtd \
		drivers/usb drivers/input drivers/hid drivers/platform sound net/wireless net/bluetooth net/mac80211; do
		rm -rf "${kernel:?}/kernel/$m"
	done
	chroot "$root" depmod -a "${kernel##*/}"
done

# The fixed appliance: libguestfs-make-fixed-appliance has supermin build
# it from the packages installed here and boots it once (guestfish -a
# /dev/null run), under TCG: a build that works proves the appliance boots.
say "building and booting libguestfs' fixed appliance under TCG (1-3 minutes)"
mkdir -p "$root/var/tmp/appliance-build"
chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TMPDIR=/var/tmp \
	LIBGUESTFS_BACKEND=direct LIBGUESTFS_BACKEND_SETTINGS=force_tcg LIBGUESTFS_CACHEDIR=/var/tmp/appliance-build \
	libguestfs-make-fixed-appliance "$appliance"
rm -rf "$root/var/tmp/appliance-build"
for f in kernel initrd root README.fixed; do
	[ -s "$root$appliance/$f" ] || { say "libguestfs-make-fixed-appliance left no $appliance/$f"; exit 1; }
done

# supermin makes the appliance's root a sparse 4 GiB ext2 image; image
# layers are not sparse, so it is shrunk to its contents plus 256 MiB for
# what the appliance writes (into a qemu snapshot in TMPDIR, never into
# the file).
img="$root$appliance/root"
e2fsck -fy "$img" >/dev/null || [ $? -le 1 ]
blocksize=$(dumpe2fs -h "$img" 2>/dev/null | sed -n 's/^Block size: *//p')
min=$(resize2fs -P "$img" 2>/dev/null | sed -n 's/^Estimated minimum size of the filesystem: //p')
blocks=$((min + (256 << 20) / blocksize))
resize2fs "$img" "$blocks" >/dev/null 2>&1
truncate -s $((blocks * blocksize)) "$img"
debugfs -R 'ls /lib/modules' "$img" 2>/dev/null | grep -q '[0-9]' ||
	{ say "the appliance's root has no kernel modules"; exit 1; }
chmod 0755 "$root$appliance"
chmod 0644 "$root$appliance"/*

# The appliance carries its own copies of the kernel and its modules:
# the image's are only what supermin built it from.
rm -rf "$root"/lib/modules/* "$root"/boot/*

# The user and group the conversion Job runs as (pkg/steps/pipeline
# StagingUID); HOME is the Job's writable /var/tmp. Debian's packages take
# system ids as they come (from 100 up): an account that got 107 moves to
# a free id, with its files.
free_id() {
	id=999
	while grep -q "^[^:]*:[^:]*:$id:" "$root/etc/passwd" "$root/etc/group"; do id=$((id - 1)); done
	echo "$id"
}
move_id() { # passwd|group
	name=$(awk -F: -v id="$uid" '$3 == id { print $1 }' "$root/etc/$1")
	[ -n "$name" ] || return 0
	new=$(free_id)
	say "moving the $1 entry $name from $uid to $new"
	if [ "$1" = passwd ]; then
		awk -F: -v OFS=: -v old="$uid" -v new="$new" '$3 == old { $3 = new } 1' "$root/etc/passwd" >"$root/etc/passwd.new"
		find "$root" -xdev -uid "$uid" -exec chown -h "$new" {} +
	else
		awk -F: -v OFS=: -v old="$uid" -v new="$new" '$3 == old { $3 = new } 1' "$root/etc/group" >"$root/etc/group.new"
		awk -F: -v OFS=: -v old="$uid" -v new="$new" '$4 == old { $4 = new } 1' "$root/etc/passwd" >"$root/etc/passwd.new"
		mv "$root/etc/passwd.new" "$root/etc/passwd"
		find "$root" -xdev -gid "$uid" -exec chgrp -h "$new" {} +
	fi
	[ -f "$root/etc/$1.new" ] && mv "$root/etc/$1.new" "$root/etc/$1"
	chmod 0644 "$root/etc/passwd" "$root/etc/group"
}
move_id passwd
move_id group
echo "v2v:x:$uid:$uid:virt-v2v conversion:/var/tmp:/usr/sbin/nologin" >>"$root/etc/passwd"
echo "v2v:x:$uid:" >>"$root/etc/group"

install -m 0755 "$here/v2v-self-check" "$root/usr/local/bin/v2v-self-check"

# What the image never needs at run time.
rm -rf "$root"/var/cache/debconf/*-old "$root"/var/log/* "$root"/var/cache/man \
	"$root"/usr/share/doc-base "$root"/usr/share/icons "$root"/usr/share/pixmaps
