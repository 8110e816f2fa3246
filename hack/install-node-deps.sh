#!/usr/bin/env bash
# Installs, when missing, the Debian packages the test node needs
# (framework.WithNode, test/framework/cmd/testnode): runc (containerd's
# runtime), containernetworking-plugins (bridge and host-local in
# /usr/lib/cni), iptables (kube-proxy), conntrack (kube-proxy's cleanup of
# stale UDP flows), iproute2 (ip: the veth pair and addresses) and
# util-linux (unshare, nsenter, mount), through install-debian-packages.sh
# (as root: apt-get update once, then install). containerd, the kubelet and
# the other Kubernetes binaries come from hack/build-testbin.sh.
set -euo pipefail
exec "$(dirname "${BASH_SOURCE[0]}")/install-debian-packages.sh" runc containernetworking-plugins iptables conntrack iproute2 util-linux
