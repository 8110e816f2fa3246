#!/usr/bin/env bash
# The images of make run-local's node, while the stack is up. The node
# pulls from no registry: its pods run what was imported into its
# containerd (a reference never imported waits in ErrImagePull, then
# ImagePullBackOff; with imagePullPolicy Never, ErrImageNeverPull).
#
#   hack/local-node.sh import TARBALL...   make local-import TARBALL=...: the tarballs of make image
#                                          (_output/image/vm-migration-controller.tar) and make
#                                          conversion-image (_output/conversion-image/vm-migration-conversion.tar)
#   hack/local-node.sh remove REF...       make local-remove REF=...
#   hack/local-node.sh list                the references on the node
#
# It reads the node's containerd socket from run-local's node.env
# (_output/run-local, RUN_LOCAL_DIR) and runs the testbin's ctr
# (hack/build-testbin.sh) in the CRI namespace k8s.io. Needs root.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
state=${RUN_LOCAL_DIR:-$root/_output/run-local}
die() { echo "local-node: $*" >&2; exit 1; }

[ $# -ge 1 ] || die "usage: hack/local-node.sh import TARBALL... | remove REF... | list"
[ -s "$state/node.env" ] || die "no local stack: $state/node.env is missing (make run-local starts one)"
# shellcheck source=/dev/null
. "$state/node.env"
[ -S "${CONTAINERD_ADDRESS:-}" ] || die "the node's containerd socket ${CONTAINERD_ADDRESS:-(none in $state/node.env)} is gone: is make run-local still running?"
ctr=$root/_output/testbin/ctr
[ -x "$ctr" ] || ctr=$("$root/hack/build-testbin.sh" | tail -n 1)/ctr
node_ctr() { "$ctr" --address "$CONTAINERD_ADDRESS" --namespace k8s.io "$@"; }

command=$1
shift
case $command in
  import)
    [ $# -ge 1 ] || die "import: name the image tarballs"
    for tarball in "$@"; do
      [ -f "$tarball" ] || die "import: $tarball is not a file"
      node_ctr images import --no-unpack=false "$tarball"
    done
    ;;
  remove)
    [ $# -ge 1 ] || die "remove: name the image references (hack/local-node.sh list)"
    for ref in "$@"; do
      node_ctr images remove --sync "$ref"
    done
    ;;
  list)
    node_ctr images list --quiet | grep -v '^sha256:' || true
    ;;
  *) die "unknown command $command: want import, remove or list" ;;
esac
