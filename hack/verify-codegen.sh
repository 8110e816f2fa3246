#!/usr/bin/env bash
# Regenerates into a temporary copy of the tree and fails if the committed
# generated code, CRD or test CRD schemas differ from what the generators
# produce now.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

tar -C "$root" --exclude=./.git --exclude=./_output -cf - . | tar -C "$tmp" -xf -
"$tmp/hack/update-codegen.sh" >/dev/null

status=0
for path in pkg/apis pkg/generated manifests/crd test/crds; do
  if ! diff -ruN "$root/$path" "$tmp/$path"; then
    status=1
  fi
done
if [ "$status" -ne 0 ]; then
  echo "generated code is out of date: run hack/update-codegen.sh" >&2
  exit 1
fi
echo "generated code is up to date"
