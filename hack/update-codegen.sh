#!/usr/bin/env bash
# Regenerates everything derived from the API types:
#   - deepcopy functions for pkg/apis
#   - typed clientsets, listers and informers in pkg/generated for our API,
#     for KubeVirt's core/v1 (kubevirt.io/api) and for CDI's core/v1beta1
#     (kubevirt.io/containerized-data-importer-api), one clientset per API
#     because both upstream packages are named "core"
#   - the CustomResourceDefinition in manifests/crd (controller-gen)
#   - the schemas of KubeVirt's and CDI's test CRDs in test/crds
#     (hack/update-test-crds.sh)
# Generated files are never edited by hand; hack/verify-codegen.sh checks them.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
module=$(go list -m)
boilerplate="$root/hack/boilerplate.go.txt"
# On a fresh machine the module is not in the module cache yet, and go list
# then prints an empty directory: download it first.
go mod download k8s.io/code-generator
codegen_dir=$(go list -m -f '{{.Dir}}' k8s.io/code-generator)
[ -f "$codegen_dir/kube_codegen.sh" ] || { echo "update-codegen: k8s.io/code-generator not found in the module cache ($codegen_dir)" >&2; exit 1; }
gobin=$(go env GOBIN); gobin=${gobin:-$(go env GOPATH)/bin}

# shellcheck source=/dev/null
source "$codegen_dir/kube_codegen.sh"

kube::codegen::gen_helpers --boilerplate "$boilerplate" "$root/pkg/apis"

kube::codegen::gen_client \
  --with-watch \
  --output-dir "$root/pkg/generated/migration" \
  --output-pkg "$module/pkg/generated/migration" \
  --boilerplate "$boilerplate" \
  "$root/pkg/apis"

# KubeVirt and CDI: their API packages live in the module cache, so the
# generators (installed by gen_client above) are called with import paths.
gen_external() { # <name> <api import path> <group/version>
  local name=$1 input=$2 out="$root/pkg/generated/$1" pkg="$module/pkg/generated/$1"
  rm -rf "$out"
  "$gobin/client-gen" --go-header-file "$boilerplate" \
    --output-dir "$out/clientset" --output-pkg "$pkg/clientset" \
    --clientset-name versioned --input-base "" --input "$input"
  "$gobin/lister-gen" --go-header-file "$boilerplate" \
    --output-dir "$out/listers" --output-pkg "$pkg/listers" "$input"
  "$gobin/informer-gen" --go-header-file "$boilerplate" \
    --output-dir "$out/informers" --output-pkg "$pkg/informers" \
    --versioned-clientset-package "$pkg/clientset/versioned" \
    --listers-package "$pkg/listers" "$input"
}
gen_external kubevirt kubevirt.io/api/core/v1
gen_external cdi kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1

go tool controller-gen crd:crdVersions=v1 paths=./pkg/apis/... output:crd:artifacts:config=manifests/crd
"$root/hack/update-test-crds.sh"
