#!/usr/bin/env bash
# Builds KubeVirt's control plane from the Go module proxy, from the tools
# module hack/tools/kubevirt (kubevirt.io/kubevirt, kubevirt.io/api and
# kubevirt.io/client-go at one version, upstream's replaces, our libnbd stub):
#   - virt-operator, virt-api and virt-controller, static (CGO_ENABLED=0),
#     -trimpath, the version stamped into kubevirt.io/client-go/version as
#     upstream's hack/version.sh does (gitVersion, gitTreeState, gitCommit:
#     the tag's commit as the proxy records it, buildDate: the module's own
#     time, so a rebuild is identical);
#   - crds/*.yaml: KubeVirt's CustomResourceDefinitions, and install/*.yaml:
#     the RBAC, Service, webhook configurations, APIService and Deployments of
#     virt-api and virt-controller, and node/*.yaml: virt-handler's
#     DaemonSet, written by our hack/tools/kubevirt/cmd/kubevirt-crds from
#     virt-operator's own generators.
#   - tarballs/virt-api.tar and tarballs/virt-controller.tar: docker-archive
#     tarballs (hack/cdiimage, go-containerregistry; no container engine) of
#     each static binary alone as /usr/bin/<name>, user 107 (upstream's
#     non-root user), PATH set so that the Deployments' bare command
#     resolves, named as the install objects' Deployments name them
#     (localhost/kubevirt/<name>:<version>); `images` lists them (name,
#     reference, tarball) for the node to import.
# virt-handler and virt-launcher (cgo, and images of Debian's libvirt and
# QEMU) are hack/build-kubevirt-node.sh's, from the same tools module, so
# that make test, which runs the control plane only, never builds them.
# A separate tools module
# keeps the project's own go.mod free of KubeVirt and of the older
# Kubernetes libraries it pins.
#
# The output is cached outside the clone in one folder, keyed by the tools
# module (go.mod, go.sum, kubevirt-crds, the libnbd stub), this script and
# the Go version, so a second run takes seconds. The script prints the cache folder
# on its last line and points the git-ignored ./_output/kubevirt link at it.
# The folder also holds BUILD-INFO: the versions and each binary's build time.
#
# With a cold Go build cache this takes many minutes (virt-api the longest);
# on a shared machine run it as `nice -n 19 hack/build-kubevirt.sh`.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# take_build_lock, build_binary, check_module
. "$root/hack/lib/upstream-build.sh"
tools="$root/hack/tools/kubevirt"
libnbd="$root/hack/tools/cdi/libnbd"
module=kubevirt.io/kubevirt
# required_version <go.mod> <module> prints the version go.mod requires
# (in a require block or on a one-line require).
required_version() {
  awk -v m="$2" '$1=="require" {$1=""; $0=$0} $1==m {print $2; exit}' "$1"
}
kv_version=$(required_version "$tools/go.mod" "$module")
[ -n "$kv_version" ] || { echo "hack/tools/kubevirt/go.mod requires no $module" >&2; exit 1; }
key=$(cat "$root/hack/build-kubevirt.sh" "$tools/go.mod" "$tools/go.sum" "$tools"/tools.go "$tools"/cmd/kubevirt-crds/*.go \
  "$libnbd"/go.mod "$libnbd"/*.go \
  "$root"/hack/cdiimage/*.go "$root"/hack/image/ociimage/*.go <(go env GOVERSION) | sha256sum | cut -c1-16)
cache_root=${KUBEVIRT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vm-migration/kubevirt}
dir="$cache_root/${kv_version}-${key}"
binaries=(virt-controller virt-api virt-operator)

complete() {
  for b in "${binaries[@]}"; do [ -x "$dir/$b" ] || return 1; done
  [ -s "$dir/crds/virtualmachine.yaml" ] && [ -s "$dir/crds/kubevirt.yaml" ] && [ -s "$dir/crds/network-attachment-definition.yaml" ] && [ -d "$dir/install" ] && [ -s "$dir/images" ] && [ -s "$dir/BUILD-INFO" ]
}

if ! complete; then
  take_build_lock "$cache_root" KubeVirt
fi

# check_help <binary> fails unless `<binary> --help` exits within 30 s and
# prints its flags (pflag exits 0 after printing them for --help).
check_help() {
  local bin=$1 out
  if ! out=$(timeout 30 "$dir.tmp/$bin" --help 2>&1) || ! grep -q -- '--kubeconfig' <<<"$out"; then
    echo "$bin --help did not print its flags (it said: ${out:0:400}): removed, run again" >&2
    rm -f "$dir.tmp/$bin"
    exit 1
  fi
}

if ! complete; then
  start=$SECONDS
  mkdir -p "$dir.tmp"
  vpkg=kubevirt.io/client-go/version
  mod_time=$(cd "$tools" && go list -mod=readonly -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' "$module")
  # The commit the proxy records for the tag (the module's .info Origin).
  commit=$(cd "$tools" && go mod download -json "$module@$kv_version" | sed -n 's/^[[:space:]]*"Hash": "\([0-9a-f]\{40\}\)".*/\1/p' | head -n1)
  [ -n "$commit" ] || commit=unknown
  ldflags="-s -w -X $vpkg.gitVersion=$kv_version -X $vpkg.gitTreeState=clean -X $vpkg.buildDate=$mod_time -X $vpkg.gitCommit=$commit"
  echo "building ${binaries[*]} of KubeVirt $kv_version (many minutes with a cold Go build cache, a few minutes warm)" >&2
  for b in "${binaries[@]}"; do
    build_binary "$b" "$module/cmd/$b"
  done
  build_binary kubevirt-crds ./cmd/kubevirt-crds
  for b in "${binaries[@]}"; do
    check_module "$b" "$module" "$kv_version"
  done
  for b in virt-controller virt-api; do
    check_help "$b"
  done

  # The CRDs and install objects, from the same module version.
  rm -rf "$dir.tmp/crds" "$dir.tmp/install"
  "$dir.tmp/kubevirt-crds" -out "$dir.tmp" -image-tag "$kv_version"
  # Multus' NetworkAttachmentDefinition CRD, from the client module
  # KubeVirt builds with: virt-controller reads the definition of every
  # Multus network of an instance before it renders the launcher pod.
  nad_module=github.com/k8snetworkplumbingwg/network-attachment-definition-client
  (cd "$tools" && go mod download "$nad_module")
  nad_dir=$(cd "$tools" && go list -mod=readonly -m -f '{{.Dir}}' "$nad_module")
  install -m 0644 "$nad_dir/artifacts/networks-crd.yaml" "$dir.tmp/crds/network-attachment-definition.yaml"

  # The control plane's images, each file dated the module's time.
  rm -rf "$dir.tmp/tarballs" "$dir.tmp/images" "$dir.tmp/images.list"
  mkdir -p "$dir.tmp/tarballs"
  epoch=$(date -u -d "$mod_time" +%s)
  for b in virt-api virt-controller; do
    ref="localhost/kubevirt/$b:$kv_version"
    grep -q "image: $ref\$" "$dir.tmp"/install/*-deployment-"$b".yaml ||
      { echo "the $b Deployment of install/ does not name $ref" >&2; exit 1; }
    (cd "$root" && go run ./hack/cdiimage -image "$ref" -file "/usr/bin/$b=$dir.tmp/$b" -dir /tmp=1777 \
      -env PATH=/usr/bin:/bin -entrypoint "/usr/bin/$b" -user 107 -source-date-epoch "$epoch" -out "$dir.tmp/tarballs/$b.tar")
    echo "$b $ref tarballs/$b.tar" >>"$dir.tmp/images.list"
  done
  mv "$dir.tmp/images.list" "$dir.tmp/images"

  {
    echo "kubevirt $kv_version"
    echo "api $(required_version "$tools/go.mod" kubevirt.io/api)"
    echo "client-go $(required_version "$tools/go.mod" kubevirt.io/client-go)"
    echo "go $(go env GOVERSION)"
    echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) in $((SECONDS - start))s (per binary, when this run built it:)"
    cat "$dir.tmp/times" 2>/dev/null || true
    echo "crds $(ls "$dir.tmp/crds" | tr '\n' ' ')"
    echo "install $(ls "$dir.tmp/install" | tr '\n' ' ')"
    echo "images $(cd "$dir.tmp" && du -b tarballs/*.tar | awk '{printf "%s %d bytes; ", $2, $1}')"
  } >"$dir.tmp/BUILD-INFO"
  rm -rf "$dir"
  mv "$dir.tmp" "$dir"
  echo "built in $((SECONDS - start))s" >&2
fi

mkdir -p "$root/_output"
ln -sfn "$dir" "$root/_output/kubevirt"
echo "$dir"
