#!/bin/sh
# mmdebstrap customize hook of hack/build-guest-images.sh: makes the
# bootstrapped tree ($1) a small VMware-like Debian guest.
set -eu
root=$1
here=$(dirname "$0")

echo v2v-guest >"$root/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\tv2v-guest\n' >"$root/etc/hosts"
# The static network's resolver (each image's network stack is set up by
# build-guest-images.sh: ifupdown or systemd-networkd).
echo 'nameserver 192.168.122.1' >"$root/etc/resolv.conf"
# No network stack runs until an image picks one.
chroot "$root" systemctl disable networking.service >/dev/null 2>&1 || true

# The host's apt sources were pasted in by mmdebstrap: they name the
# build machine's mirror, which has no business inside a test guest.
rm -f "$root/etc/apt/sources.list"
find "$root/etc/apt/sources.list.d" -type f \( -name '*.list' -o -name '*.sources' \) -delete

# The kernel speaks on the serial console; grub waits one second.
cat >"$root/etc/default/grub" <<'GRUB'
GRUB_DEFAULT=0
GRUB_TIMEOUT=1
GRUB_DISTRIBUTOR=Debian
GRUB_CMDLINE_LINUX_DEFAULT=""
GRUB_CMDLINE_LINUX="console=tty0 console=ttyS0,115200n8"
GRUB_TERMINAL="console serial"
GRUB_SERIAL_COMMAND="serial --unit=0 --speed=115200"
GRUB_DISABLE_OS_PROBER=true
GRUB

# Documentation, locales and the kernel modules of hardware no VM has
# (graphics, sound, wireless, media...) go: the tree stays near 600 MiB.
rm -rf "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* \
	"$root"/usr/share/locale/* "$root"/usr/share/lintian/*
for kernel in "$root"/lib/modules/*; do
	for m in drivers/gpu drivers/media drivers/net/wireless drivers/infiniband drivers/staging \
		drivers/bluetooth drivers/isdn drivers/iio drivers/hwmon drivers/mtd sound net/wireless \
		net/bluetooth net/mac80211; do
		rm -rf "$kernel/kernel/$m"
	done
	chroot "$root" depmod -a "${kernel##*/}"
done

# An initramfs as a VMware guest tailored to its hardware has it: the
# VMware storage drivers and the root file system, no virtio. It is small
# (virt-v2v's update-initramfs under TCG dominates a conversion), and a
# guest that boots on virtio afterwards proves the conversion added them.
cat >"$root/etc/initramfs-tools/conf.d/v2v-guest.conf" <<'INITRAMFS'
MODULES=list
INITRAMFS
cat >>"$root/etc/initramfs-tools/modules" <<'MODULES'
vmw_pvscsi
mptspi
ahci
ata_piix
sd_mod
ext4
MODULES
chroot "$root" update-initramfs -u -k all

install -m 0755 "$here/v2v-guest-marker" "$root/usr/local/sbin/v2v-guest-marker"
install -m 0644 "$here/v2v-guest-marker.service" "$root/etc/systemd/system/v2v-guest-marker.service"
mkdir -p "$root/etc/systemd/system/multi-user.target.wants"
ln -sf ../v2v-guest-marker.service "$root/etc/systemd/system/multi-user.target.wants/v2v-guest-marker.service"

# Nothing to fetch at boot in a test: no apt timers.
rm -f "$root/etc/systemd/system/timers.target.wants/apt-daily.timer" \
	"$root/etc/systemd/system/timers.target.wants/apt-daily-upgrade.timer"

# A root without a password cannot log in; the guest is driven by its marker.
chroot "$root" passwd --lock root >/dev/null
