#!/usr/bin/env bash
# Regenerates the schemas of KubeVirt's and CDI's CRDs in test/crds from
# their upstream Go types, the versions go.mod pins (kubevirt.io/api,
# kubevirt.io/containerized-data-importer-api), with our own controller-gen
# (a `tool` in go.mod). controller-gen's schemapatch generator rewrites only
# each version's openAPIV3Schema of the manifests already there: their names,
# short names, subresources, printer columns and header comments stay as
# written. Descriptions are dropped (maxDescLen=0) to keep each CRD far below
# the 256 KiB that client-side apply's last-applied annotation allows.
#
#   hack/update-test-crds.sh [DIR]   DIR defaults to test/crds
#
# The result is stable run to run; hack/verify-codegen.sh checks it is
# committed up to date.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=${1:-$root/test/crds}
# Client-side apply stores the whole object in an annotation, and all of an
# object's annotations together may not exceed 256 KiB.
max_bytes=$((200 << 10))

# Manifests whose schema is kept by hand: KubeVirt's own KubeVirt resource,
# whose Go type holds a float32 (a rate limiter's qps), which schemapatch
# refuses (it has no allowDangerousTypes).
by_hand=(kubevirt.io_kubevirts.yaml)

cd "$root"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for f in "$dir"/*.yaml; do
  skip=false
  for h in "${by_hand[@]}"; do [[ $(basename "$f") == "$h" ]] && skip=true; done
  $skip || cp "$f" "$work/"
done
go tool controller-gen \
  schemapatch:manifests="$work",maxDescLen=0 \
  paths=kubevirt.io/api/core/v1 \
  paths=kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1 \
  output:dir="$work"
cp "$work"/*.yaml "$dir/"

for f in "$dir"/*.yaml; do
  size=$(wc -c <"$f")
  if ((size > max_bytes)); then
    echo "update-test-crds: $f is $size bytes, more than $max_bytes: kubectl apply would fail on it" >&2
    exit 1
  fi
done
