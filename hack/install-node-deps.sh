#!/usr/bin/env bash
# Installs, when missing, the Debian packages the test node needs
# (framework.WithNode, test/framework/cmd/testnode): runc (containerd's
# runtime), containernetworking-plugins (bridge and host-local in
# /usr/lib/cni), iptables (kube-proxy), conntrack (kube-proxy's cleanup of
# stale UDP flows), iproute2 (ip: the veth pair and addresses) and
# util-linux (unshare, nsenter, mount). As root it runs apt-get update
# once, then installs what is missing; otherwise it names what is missing
# and fails. containerd, the kubelet and the other Kubernetes binaries come
# from hack/build-testbin.sh.
set -euo pipefail

packages=(runc containernetworking-plugins iptables conntrack iproute2 util-linux)

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
echo "installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
