#!/usr/bin/env bash
# Builds the real Kubernetes binaries the integration and e2e tests run
# against, from the Go module proxy:
#   - from the tools module hack/tools/testbin (k8s.io/kubernetes and etcd):
#     kube-apiserver, kube-controller-manager, kube-scheduler, kubelet,
#     kube-proxy, kubectl and etcd;
#   - from the tools module hack/tools/containerd (its own module: containerd
#     pins other versions of shared dependencies): containerd,
#     containerd-shim-runc-v2 and ctr, static (CGO_ENABLED=0, without the
#     btrfs, devmapper and zfs snapshotters).
# Separate tools modules keep the project's own go.mod free of
# k8s.io/kubernetes and containerd.
#
# The binaries are cached outside the clone in one folder, keyed by both
# tools modules' go.mod/go.sum and the Go version, so a second run (or CI on
# the same machine) takes seconds. The script prints the cache folder on its
# last line and points the git-ignored ./_output/testbin link at it.
#
# Versions are pinned in the two go.mod files. The node's Debian packages
# (runc, CNI plugins, iptables...) are hack/install-node-deps.sh's.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools="$root/hack/tools/testbin"
ctrd_tools="$root/hack/tools/containerd"
kube_version=$(awk '$1=="k8s.io/kubernetes" {print $2}' "$tools/go.mod")
containerd_version=$(awk '$1=="github.com/containerd/containerd/v2" {print $2}' "$ctrd_tools/go.mod")
key=$(cat "$tools/go.mod" "$tools/go.sum" "$ctrd_tools/go.mod" "$ctrd_tools/go.sum" <(go env GOVERSION) | sha256sum | cut -c1-16)
cache_root=${TESTBIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vm-migration/testbin}
dir="$cache_root/${kube_version}-${key}"
kube_binaries=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
containerd_binaries=(containerd containerd-shim-runc-v2 ctr)
binaries=("${kube_binaries[@]}" etcd "${containerd_binaries[@]}")

complete() {
  for b in "${binaries[@]}"; do [ -x "$dir/$b" ] || return 1; done
}

if ! complete; then
  # One build at a time per cache: a second caller (another clone, a
  # parallel CI job) waits here and then finds the binaries in place.
  mkdir -p "$cache_root"
  if command -v flock >/dev/null; then
    exec 9>"$cache_root/.lock"
    echo "waiting for the testbin build lock $cache_root/.lock" >&2
    flock 9
  fi
fi

# build_in <module dir> <binary> <package> [go build flags...] builds one
# binary into $dir.tmp unless an earlier, interrupted run already did.
build_in() {
  local module=$1 bin=$2 pkg=$3
  shift 3
  [ -x "$dir.tmp/$bin" ] && return 0
  local t=$SECONDS
  (cd "$module" && go build -mod=readonly -trimpath "$@" -o "$dir.tmp/$bin" "$pkg")
  echo "built $bin in $((SECONDS - t))s" >&2
}

# check_version <binary> <expected line> <version flag...> removes a binary
# that does not run or reports another version (truncated by a full disk,
# wrong platform), so it never enters the cache.
check_version() {
  local bin=$1 want=$2
  shift 2
  local out
  out=$("$dir.tmp/$bin" "$@" 2>&1) || true
  if ! grep -qF -- "$want" <<<"$out"; then
    echo "$bin does not report $want: removed, run again" >&2
    rm -f "$dir.tmp/$bin"
    exit 1
  fi
}

if ! complete; then
  start=$SECONDS
  mkdir -p "$dir.tmp"
  minor=${kube_version#v1.}; minor=${minor%%.*}
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  done
  echo "building ${kube_binaries[*]} $kube_version (20-40 minutes with a cold Go build cache, a few minutes warm)" >&2
  for b in "${kube_binaries[@]}"; do
    build_in "$tools" "$b" "k8s.io/kubernetes/cmd/$b" -ldflags "$ldflags"
  done
  build_in "$tools" etcd go.etcd.io/etcd/server/v3 -ldflags "-s -w"
  echo "building containerd $containerd_version" >&2
  ctrd_ldflags="-s -w -X github.com/containerd/containerd/v2/version.Version=$containerd_version"
  for b in "${containerd_binaries[@]}"; do
    CGO_ENABLED=0 build_in "$ctrd_tools" "$b" "github.com/containerd/containerd/v2/cmd/$b" \
      -tags "no_btrfs no_devmapper no_zfs" -ldflags "$ctrd_ldflags"
  done

  for b in kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy; do
    check_version "$b" "Kubernetes $kube_version" --version
  done
  check_version kubectl "Client Version: $kube_version" version --client
  check_version etcd "etcd Version:" --version
  check_version containerd "containerd github.com/containerd/containerd/v2 $containerd_version" --version
  check_version ctr "ctr github.com/containerd/containerd/v2 $containerd_version" --version
  check_version containerd-shim-runc-v2 "Version:  $containerd_version" -v
  rm -rf "$dir"
  mv "$dir.tmp" "$dir"
  echo "built in $((SECONDS - start))s" >&2
fi

mkdir -p "$root/_output"
ln -sfn "$dir" "$root/_output/testbin"
echo "$dir"
