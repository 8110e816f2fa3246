#!/usr/bin/env bash
# Builds the real Kubernetes control-plane binaries the integration and e2e
# tests run against (kube-apiserver, kube-controller-manager, etcd) from the
# Go module proxy, using the separate tools module in hack/tools/testbin so the
# project's own go.mod never pulls in k8s.io/kubernetes.
#
# The binaries are cached outside the clone, keyed by the tools module's
# go.mod/go.sum and the Go version, so a second run (or CI on the same
# machine) takes seconds. The script prints the cache directory on its last
# line and points the git-ignored ./_output/testbin link at it.
#
# Versions are pinned in one place: hack/tools/testbin/go.mod.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools="$root/hack/tools/testbin"
kube_version=$(awk '$1=="k8s.io/kubernetes" {print $2}' "$tools/go.mod")
key=$(cat "$tools/go.mod" "$tools/go.sum" <(go env GOVERSION) | sha256sum | cut -c1-16)
cache_root=${TESTBIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vm-migration/testbin}
dir="$cache_root/${kube_version}-${key}"
binaries=(kube-apiserver kube-controller-manager etcd)

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

if ! complete; then
  start=$SECONDS
  mkdir -p "$dir.tmp"
  minor=${kube_version#v1.}; minor=${minor%%.*}
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  done
  cd "$tools"
  for b in kube-apiserver kube-controller-manager; do
    if [ ! -x "$dir.tmp/$b" ]; then
      echo "building $b $kube_version (10-20 minutes with a cold Go build cache, about a minute warm)" >&2
      go build -mod=readonly -trimpath -ldflags "$ldflags" -o "$dir.tmp/$b" "k8s.io/kubernetes/cmd/$b"
    fi
  done
  if [ ! -x "$dir.tmp/etcd" ]; then
    echo "building etcd" >&2
    go build -mod=readonly -trimpath -ldflags "-s -w" -o "$dir.tmp/etcd" go.etcd.io/etcd/server/v3
  fi
  # A binary that does not run (truncated by a full disk, wrong platform)
  # must not enter the cache.
  for b in kube-apiserver kube-controller-manager; do
    "$dir.tmp/$b" --version | grep -qx "Kubernetes $kube_version" ||
      { echo "$b does not report version $kube_version: removed, run again" >&2; rm -f "$dir.tmp/$b"; exit 1; }
  done
  "$dir.tmp/etcd" --version >/dev/null || { echo "etcd does not run: removed, run again" >&2; rm -f "$dir.tmp/etcd"; exit 1; }
  rm -rf "$dir"
  mv "$dir.tmp" "$dir"
  echo "built in $((SECONDS - start))s" >&2
fi

mkdir -p "$root/_output"
ln -sfn "$dir" "$root/_output/testbin"
echo "$dir"
