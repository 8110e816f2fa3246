#!/usr/bin/env bash
# Installs the Debian packages named as arguments that are missing. As root
# it runs apt-get update once, then installs what is missing; otherwise it
# names what is missing and fails. The scripts that know which packages a
# part of the project needs (hack/install-node-deps.sh...) call it.
# Recommended packages are left out unless WITH_RECOMMENDS=1.
set -euo pipefail

missing=()
for p in "$@"; do
  dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "missing Debian packages: ${missing[*]}; install them as root (apt-get install -y ${missing[*]})" >&2
  exit 1
fi
echo "installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
recommends=(--no-install-recommends)
[ "${WITH_RECOMMENDS:-}" = 1 ] && recommends=()
apt-get install -y -q "${recommends[@]}" "${missing[@]}"
