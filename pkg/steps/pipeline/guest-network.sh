#!/bin/sh
# Rendered by the VM migration controller (pkg/steps/pipeline, netid.go).
# Runs INSIDE the converted guest, in its root file system (guestfish's
# sh), with the guest's own sh, awk, grep and sed. $1 is network.conf:
#   mode pin|inspect
#   nic <mac> <addresses VMware Tools reported, comma-separated|-> <ens<slot>|->
# For each NIC it finds the interface name the guest's network
# configuration gives it: the interface whose static configuration holds
# one of its addresses (ifupdown, systemd-networkd, NetworkManager
# keyfiles, ifcfg files, netplan), else VMware's name for its PCI slot
# where the configuration uses that name. In pin mode it keeps that name
# for the NIC's MAC address with a systemd .link file, which udev applies
# whatever manages the network. One line per NIC on stdout:
#   nic <mac> <name|-> <address|slot|-> <pinned|found|-> <static addresses|-> [why not]
set -u
conf=$1
mode=$(sed -n 's/^mode //p' "$conf")
# root is "" in the guest (tests run the script over a tree of their own).
root=${VM_MIGRATION_GUEST_ROOT:-}
linkdir=$root/etc/systemd/network

# files lists the regular files among its arguments (unmatched globs stay
# literal and are dropped).
files() {
	for f in "$@"; do
		[ -f "$f" ] && printf '%s\n' "$f"
	done
	return 0
}

ifupdown_files() { files "$root"/etc/network/interfaces "$root"/etc/network/interfaces.d/*; }
networkd_files() { files "$root"/etc/systemd/network/*.network; }
nm_files() { files "$root"/etc/NetworkManager/system-connections/*; }
ifcfg_files() { files "$root"/etc/sysconfig/network-scripts/ifcfg-* "$root"/etc/sysconfig/network/ifcfg-*; }
netplan_files() { files "$root"/etc/netplan/*.yaml "$root"/etc/netplan/*.yml; }

# names_for IP prints the interfaces whose static configuration holds IP.
names_for() {
	ip=$1
	ifupdown_files | while read -r f; do
		awk -v ip="$ip" '
			$1 == "iface" { name = $2; next }
			$1 == "address" { a = $2; sub(/\/.*/, "", a); if (a == ip && name != "") print name }' "$f"
	done
	networkd_files | while read -r f; do
		awk -v ip="$ip" '
			/^[ \t]*\[/ { sect = $0; gsub(/[][ \t]/, "", sect); next }
			{ line = $0; sub(/^[ \t]+/, "", line) }
			sect == "Match" && line ~ /^Name[ \t]*=/ {
				v = line; sub(/^Name[ \t]*=[ \t]*/, "", v); split(v, w, /[ \t]+/); if (name == "") name = w[1] }
			(sect == "Network" || sect == "Address") && line ~ /^Address[ \t]*=/ {
				v = line; sub(/^Address[ \t]*=[ \t]*/, "", v); sub(/\/.*/, "", v); if (v == ip) hit = 1 }
			END { if (hit && name != "" && name !~ /[*?]/ && index(name, "[") == 0) print name }' "$f"
	done
	nm_files | while read -r f; do
		awk -v ip="$ip" '
			/^[ \t]*interface-name[ \t]*=/ { v = $0; sub(/^[^=]*=[ \t]*/, "", v); name = v }
			/^[ \t]*address(es)?[0-9]*[ \t]*=/ {
				v = $0; sub(/^[^=]*=[ \t]*/, "", v); split(v, p, /[,;]/); a = p[1]; sub(/\/.*/, "", a); gsub(/[ \t]/, "", a)
				if (a == ip) hit = 1 }
			END { if (hit && name != "") print name }' "$f"
	done
	ifcfg_files | while read -r f; do
		awk -v ip="$ip" '
			/^[ \t]*DEVICE=/ { v = $0; sub(/^[^=]*=/, "", v); gsub(/["\047 \t]/, "", v); name = v }
			/^[ \t]*IPADDR[0-9_]*=/ { v = $0; sub(/^[^=]*=/, "", v); gsub(/["\047 \t]/, "", v); sub(/\/.*/, "", v); if (v == ip) hit = 1 }
			END { if (hit) { if (name == "") { name = FILENAME; sub(/.*ifcfg-/, "", name) } print name } }' "$f"
	done
	netplan_files | while read -r f; do
		awk -v ip="$ip" '
			{ line = $0; sub(/#.*/, "", line) }
			line ~ /^[ \t]*$/ { next }
			{
				match(line, /^ */); ind = RLENGTH
				while (depth > 0 && ind <= level[depth]) depth--
				if (line ~ /^ *(- )?[A-Za-z0-9_.@-]+:( |$)/) {
					k = line; sub(/^ *(- )?/, "", k); sub(/:.*/, "", k); depth++; level[depth] = ind; key[depth] = k
				}
				n = split(line, t, /[][ ,"\047\t]+/)
				for (i = 1; i <= n; i++) {
					a = t[i]; sub(/\/.*/, "", a)
					if (a != ip) continue
					for (d = 1; d < depth; d++)
						if (key[d] ~ /^(ethernets|bonds|bridges|vlans|wifis)$/) { print key[d + 1]; break }
				}
			}' "$f"
	done
}

# mentioned NAME says whether the guest's network configuration uses the
# interface name NAME.
mentioned() {
	[ -f "$root/etc/sysconfig/network-scripts/ifcfg-$1" ] || [ -f "$root/etc/sysconfig/network/ifcfg-$1" ] && return 0
	{ ifupdown_files; networkd_files; nm_files; ifcfg_files; netplan_files; } | while read -r f; do
		grep -qw -- "$1" "$f" && echo yes && break
	done | grep -q yes
}

# pin keeps NAME for the interface with the MAC address MAC.
pin() {
	mkdir -p "$linkdir" || return 1
	printf '%s\n' "# Written by the VM migration controller: the name this interface had on VMware." \
		"[Match]" "MACAddress=$1" "" "[Link]" "Name=$2" >"$linkdir/10-vm-migration-$(echo "$1" | tr -d :).link"
}

taken=' '
while read -r kind mac addrs slot; do
	[ "$kind" = nic ] || continue
	name='' how='' static=''
	for ip in $(echo "$addrs" | tr , ' '); do
		[ "$ip" != - ] || continue
		n=$(names_for "$ip" | head -n 1)
		[ -n "$n" ] || continue
		static="${static:+$static,}$ip"
		[ -n "$name" ] || { name=$n how=address; }
	done
	if [ -z "$name" ] && [ "$slot" != - ] && mentioned "$slot"; then
		name=$slot how=slot
	fi
	if [ -z "$name" ]; then
		echo "nic $mac - - - ${static:--} no network configuration in the guest names this NIC"
		continue
	fi
	case "$taken" in
	*" $name "*)
		echo "nic $mac $name $how - ${static:--} another NIC of the guest has the name $name"
		continue
		;;
	esac
	taken="$taken$name "
	state=found
	if [ "$mode" = pin ]; then
		if ! pin "$mac" "$name"; then
			echo "nic $mac $name $how - ${static:--} writing $linkdir in the guest failed"
			continue
		fi
		state=pinned
	fi
	echo "nic $mac $name $how $state ${static:--}"
done <"$conf"
# Where the guest labels files for SELinux, label the new ones.
if [ "$mode" = pin ] && command -v restorecon >/dev/null 2>&1; then
	restorecon "$linkdir"/10-vm-migration-*.link >/dev/null 2>&1 || true
fi
exit 0
