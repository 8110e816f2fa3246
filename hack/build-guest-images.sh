#!/usr/bin/env bash
# Builds the real Linux guest disks the conversion tests migrate: a small
# Debian guest (the host's release, bookworm on Debian 12) as a VMware VM
# would hold it (open-vm-tools installed, an initramfs with the VMware
# storage drivers and no virtio), with the QEMU guest agent installed (it
# starts when its virtio-serial port appears), D-Bus (so that logind
# powers the guest off on ACPI's power button) and VMware's network: a
# static IPv4 address on the first NIC, which VMware names ens192
# (192.168.122.10/24, gateway and DNS 192.168.122.1), DHCP on the second
# (ens224), in two variants covering two network stacks:
#
#   bios.img  MBR, one ext4 root, grub for i386-pc; ifupdown
#             (/etc/network/interfaces, hack/guest/interfaces)
#   efi.img   GPT, a FAT ESP and an ext4 root, shim and signed grub in
#             the removable path (boots with or without secure boot), and
#             the grub.cfg Debian keeps in EFI/debian (virt-v2v looks
#             there); systemd-networkd (hack/guest/*.network)
#
# Both are sparse raw images of 1.5 GiB. Each prints, once booted, a line
# starting with V2V-GUEST-UP on its first serial port that reports what a
# conversion leaves behind (hack/guest/v2v-guest-marker).
#
# Packages come from the machine's own apt sources (never a hard-coded
# mirror): the Debian sources of /etc/apt for the host's release. The
# images are cached outside the clone, keyed by this script, hack/guest/
# and the release, in ~/.cache/vm-migration/guests/<key>/ (GUEST_CACHE
# overrides the parent), built once under a lock; a second run takes
# milliseconds. The script prints the cache directory on its last line and
# points the git-ignored ./_output/guests link at it. guest.env there
# records the release, the kernel and the build times, <image>.sha256 each
# image's checksum.
#
# Needs root (mmdebstrap in root mode) and the packages mmdebstrap,
# libguestfs-tools and a kernel in /boot for libguestfs' appliance, which
# it installs when missing (hack/install-conversion-deps.sh).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
guest_dir="$root/hack/guest"
suite=${GUEST_SUITE:-$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")}
key=$( (cat "${BASH_SOURCE[0]}"; for f in "$guest_dir"/*; do echo "${f##*/}"; cat "$f"; done; echo "$suite") | sha256sum | cut -c1-16)
cache_root=${GUEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vm-migration/guests}
dir="$cache_root/$suite-$key"
images=(bios.img efi.img)

complete() {
  [ -f "$dir/guest.env" ] || return 1
  for i in "${images[@]}"; do [ -s "$dir/$i" ] || return 1; done
}

link() {
  mkdir -p "$root/_output"
  ln -sfn "$dir" "$root/_output/guests"
  echo "$dir"
}

if complete; then link; exit 0; fi

[ "$(id -u)" = 0 ] || { echo "building the guest images needs root (mmdebstrap in root mode)" >&2; exit 1; }
# mmdebstrap, guestfish and the kernel libguestfs' appliance boots.
"$root/hack/install-conversion-deps.sh"

# One build at a time per cache: a second caller waits, then finds the images.
mkdir -p "$cache_root"
exec 9>"$cache_root/.lock"
echo "waiting for the guest image build lock $cache_root/.lock" >&2
flock 9
if complete; then link; exit 0; fi

# The host's Debian sources for the guest's release, as files mmdebstrap
# pastes into the guest (the customize hook removes them again).
sources=()
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] || continue
  grep -Eq "^(Suites:.*[[:space:]]|deb[[:space:]].*[[:space:]])$suite([[:space:]]|$)" "$f" || continue
  grep -Eqi 'debian' "$f" || continue
  sources+=("$f")
done
[ ${#sources[@]} -gt 0 ] || { echo "no Debian apt source for $suite in /etc/apt: cannot build the guests" >&2; exit 1; }

start=$SECONDS
work="$dir.tmp"
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
# No KVM for libguestfs: the appliance kernel does not run on every /dev/kvm
# (a paravirtual one, PVM, refuses it); TCG works everywhere.
export LIBGUESTFS_BACKEND=direct LIBGUESTFS_BACKEND_SETTINGS=force_tcg

echo "bootstrapping a $suite guest tree from ${sources[*]} (5-10 minutes)" >&2
mmdebstrap --variant=minbase --mode=root \
  --include=linux-image-amd64,systemd-sysv,udev,kmod,initramfs-tools,e2fsprogs,dosfstools,util-linux \
  --include=grub2-common,grub-pc-bin,grub-efi-amd64-bin,grub-efi-amd64-signed,shim-signed \
  --include=open-vm-tools,qemu-guest-agent,ifupdown,isc-dhcp-client,iproute2,dbus \
  --customize-hook="$guest_dir/customize.sh" \
  "$suite" "$work/rootfs.tar" "${sources[@]}"
bootstrap=$((SECONDS - start))

assemble_bios() {
  guestfish --rw <<EOF
sparse $work/bios.img 1536M
run
part-init /dev/sda mbr
part-add /dev/sda p 2048 -1
part-set-bootable /dev/sda 1 true
mkfs ext4 /dev/sda1 label:v2v-root
mount /dev/sda1 /
tar-in $work/rootfs.tar / xattrs:true acls:true
write /etc/fstab "LABEL=v2v-root / ext4 errors=remount-ro 0 1\n"
command "grub-install --target=i386-pc /dev/sda"
command "update-grub"
upload $guest_dir/interfaces /etc/network/interfaces
command "systemctl enable networking.service"
EOF
}

assemble_efi() {
  # ESP: sectors 2048-206847 (100 MiB), EFI System Partition type.
  guestfish --rw <<EOF
sparse $work/efi.img 1536M
run
part-init /dev/sda gpt
part-add /dev/sda p 2048 206847
part-add /dev/sda p 206848 -34
part-set-gpt-type /dev/sda 1 C12A7328-F81F-11D2-BA4B-00A0C93EC93B
mkfs vfat /dev/sda1 label:V2V-ESP
mkfs ext4 /dev/sda2 label:v2v-root
mount /dev/sda2 /
tar-in $work/rootfs.tar / xattrs:true acls:true
mkdir-p /boot/efi
mount /dev/sda1 /boot/efi
write /etc/fstab "LABEL=v2v-root / ext4 errors=remount-ro 0 1\nLABEL=V2V-ESP /boot/efi vfat umask=0077 0 2\n"
command "grub-install --target=x86_64-efi --efi-directory=/boot/efi --removable --no-nvram --uefi-secure-boot"
command "update-grub"
mkdir-p /boot/efi/EFI/debian
cp /boot/efi/EFI/BOOT/grubx64.efi /boot/efi/EFI/debian/grubx64.efi
cp /boot/efi/EFI/BOOT/BOOTX64.EFI /boot/efi/EFI/debian/shimx64.efi
cp /boot/efi/EFI/BOOT/grub.cfg /boot/efi/EFI/debian/grub.cfg
mkdir-p /etc/systemd/network
upload $guest_dir/10-ens192.network /etc/systemd/network/10-ens192.network
upload $guest_dir/20-ens224.network /etc/systemd/network/20-ens224.network
command "systemctl enable systemd-networkd.service"
EOF
}

echo "assembling bios.img and efi.img (1-3 minutes each)" >&2
s=$SECONDS; assemble_bios; bios_time=$((SECONDS - s))
s=$SECONDS; assemble_efi; efi_time=$((SECONDS - s))

# What the test compares virt-v2v's inspection with.
tar -xOf "$work/rootfs.tar" ./etc/debian_version >"$work/debian_version"
kernel=$(tar -tf "$work/rootfs.tar" | sed -n 's#^\./boot/vmlinuz-##p' | head -n 1)
cat >"$work/guest.env" <<EOF
GUEST_DISTRO=debian
GUEST_SUITE=$suite
GUEST_VERSION=$(cat "$work/debian_version")
GUEST_KERNEL=$kernel
GUEST_MARKER=V2V-GUEST-UP
GUEST_NICS=ens192,ens224
GUEST_STATIC_ADDRESS=192.168.122.10/24
GUEST_GATEWAY=192.168.122.1
GUEST_DNS=192.168.122.1
GUEST_NETSTACK_BIOS=ifupdown
GUEST_NETSTACK_EFI=networkd
BUILD_SECONDS_BOOTSTRAP=$bootstrap
BUILD_SECONDS_BIOS=$bios_time
BUILD_SECONDS_EFI=$efi_time
BUILD_KEY=$key
EOF
rm -f "$work/rootfs.tar" "$work/debian_version"
# The checksums the tests compare transferred bytes with (vcsimlocal reads them).
for i in "${images[@]}"; do sha256sum "$work/$i" | cut -d' ' -f1 >"$work/$i.sha256"; done
chmod 0444 "$work"/*.img
rm -rf "$dir"
mv "$work" "$dir"
echo "guest images built in $((SECONDS - start))s (bootstrap ${bootstrap}s, bios ${bios_time}s, efi ${efi_time}s): $(du -sh --apparent-size "$dir" | cut -f1) apparent, $(du -sh "$dir" | cut -f1) allocated" >&2
link
