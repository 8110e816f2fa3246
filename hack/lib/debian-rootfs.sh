# Sourced by the scripts that make images' root file systems from Debian
# packages with mmdebstrap (hack/build-cdi-images.sh,
# hack/build-kubevirt-node.sh). A root file system's cache key includes
# these functions' text (declare -f bootstrap_rootfs pack_rootfs).

# bootstrap_rootfs <log> <packages> <mmdebstrap arguments...> makes a root
# file system with mmdebstrap (root mode, variant essential, a directory)
# holding <packages> (space-separated, may be empty) and their
# dependencies, without manual pages, info, locales, documentation (but
# the copyrights), lintian overrides, bash completions, the machine's
# resolv.conf, sources.list and hostname, apt's caches and lists or logs;
# the arguments follow (the caller's hooks, then the release, the target
# folder and the sources). mmdebstrap's output goes to <log>; on failure
# it prints the log's end and returns 1.
bootstrap_rootfs() {
  local log=$1 pkgs=$2
  shift 2
  local include=()
  [ -n "$pkgs" ] && include=(--include="${pkgs// /,}")
  if ! mmdebstrap --variant=essential --mode=root --format=directory "${include[@]}" \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias' \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/lintian/*' --dpkgopt='path-exclude=/usr/share/bash-completion/*' \
    --customize-hook='rm -f "$1/etc/resolv.conf" "$1/etc/apt/sources.list" "$1/etc/hostname"' \
    --customize-hook='rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/* "$1"/var/log/*' \
    "$@" >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    return 1
  fi
}

# pack_rootfs <folder> <tar> <epoch> packs a root file system as a layer:
# sorted, numeric owners, PAX headers without access and change times,
# modification times clamped to <epoch>, /dev's contents left out.
pack_rootfs() {
  (cd "$1" && find . -mindepth 1 -maxdepth 1 -printf '%P\n' | LC_ALL=C sort |
    tar --create --file "$2" --sort=name --numeric-owner --format=pax \
      --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
      --mtime="@$3" --clamp-mtime --anchored --exclude='dev/*' --files-from=-)
}
