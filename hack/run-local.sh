#!/usr/bin/env bash
# Runs the product as it ships on this machine, on a real node: etcd,
# kube-apiserver, kube-controller-manager and kube-scheduler, and a real
# kubelet, kube-proxy and containerd running pods as containers (the test
# framework's node, test/framework/cmd/testnode, in network and mount
# namespaces of its own); the controller's image built as make image builds
# it and imported into the node; the controller's Deployment applied with
# kubectl apply -k from a local overlay of manifests/ that changes only
# image references; vcsim with sample VMs whose disks hold real bytes
# (test/vcsimlocal, test/vcsimlocal/cmd/vcsim-local); KubeVirt's own
# virt-api and virt-controller (v1.8.2, built from its modules by
# hack/build-kubevirt.sh, installed by test/framework/cmd/install-kubevirt);
# CDI's own controller, apiserver and uploadproxy (v1.65.0, hack/build-cdi.sh
# and hack/build-cdi-images.sh) on Rancher's local-path-provisioner
# (v0.0.30, hack/build-local-path.sh), installed by
# test/framework/cmd/install-cdi, so that every disk is imported by CDI's own
# pods; and the SIMULATED virt-handler of test/standins (virt-controller's
# launcher pods run the launcher image of test/images, QEMU under TCG). It then applies an
# example migration in a namespace that enforces PodSecurity restricted and
# shows its phase, per-disk progress and the pods of its Jobs until it
# succeeds, then the migration's own time, its downtime and which
# virt-v2v converted it (the simulated one of test/images, or with GUEST
# the real one).
#
#   hack/run-local.sh            leaves the stack up (prints export KUBECONFIG=...);
#                                Ctrl-C stops everything
#   ONCE=1 hack/run-local.sh     no terminal needed: tears down and exits 0 only
#                                if the example migration succeeded
#   GUEST=bios|efi ...           the VMs are real Debian guests (built by
#                                hack/build-guest-images.sh, 8-10 min once) converted
#                                by the real virt-v2v in the conversion image
#                                (make conversion-image); about 15 minutes
#   KUBEVIRT_NODE=1 ...         KubeVirt's own node side instead of the simulated
#                                virt-handler: virt-handler's DaemonSet and the real
#                                virt-launcher (hack/build-kubevirt-node.sh: libvirt
#                                and QEMU of Debian trixie, built once, about 15
#                                minutes); the node admits privileged pods and runs
#                                the stand-in for Multus. The sample VMs' second NIC
#                                (Multus, bridge binding) cannot run here (this
#                                kernel has no dummy links): use it with GUEST,
#                                whose VM has one NIC, on the pod network
#   VMS=web-01,db-01 ...         the source VMs vcsim serves (vcsim-local --vm each;
#                                default web-01, with GUEST $GUEST-guest); the first
#                                is the example's, each gets a migration manifest
#                                in migrations/<name>.yaml to apply
#   DISK_GIB=4 ...               each sample VM's first disk is that many GiB of
#                                pseudo-random bytes instead of 8 MiB (vcsim-local
#                                --disk-size; written into vcsim/disks/ as vcsim
#                                starts, about 10 s a GiB here); the node's volume
#                                takes as much again. Not with GUEST, whose disk is
#                                its image
#
# While the stack is up, in another terminal:
#   . _output/run-local/env      KUBECONFIG, and on PATH kubectl-vmm and the
#                                testbin's kubectl (the server's version); govc
#                                (hack/build-govc.sh) and GOVC_URL for vcsim
#   make local-import TARBALL=...  make local-remove REF=...  (hack/local-node.sh)
#
# Needs root (the node). State, logs, the env file and the migration
# manifests live in _output/run-local (RUN_LOCAL_DIR). Binaries are built into
# _output/local/bin; a second run reuses them, the images and Go's build cache.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
state=${RUN_LOCAL_DIR:-$root/_output/run-local}
bin=$root/_output/local/bin
once=${ONCE:-}
guest=${GUEST:-}
kubevirt_node=${KUBEVIRT_NODE:-}
disk_gib=${DISK_GIB:-}
case $disk_gib in
  "" | [1-9] | [1-9][0-9] | [1-9][0-9][0-9]) ;;
  *) printf '[run-local] error: DISK_GIB=%s: want a whole number of GiB from 1 to 999\n' "$disk_gib" >&2; exit 1 ;;
esac
# A disk of DISK_GIB takes about 10 s a GiB to write when vcsim starts, and
# the migration moves it: a minute a GiB more of patience, at most.
timeout=${RUN_LOCAL_TIMEOUT:-$(($([ -n "$guest" ] && echo 3600 || echo 300) + 60 * ${disk_gib:-0}))}
namespace=migrations
started=$SECONDS

say() { printf '[run-local %3ds] %s\n' "$((SECONDS - started))" "$*" >&2 || true; }
die() { say "error: $*"; exit 1; }

case $guest in
  "" | bios | efi) ;;
  *) die "GUEST=$guest: want bios or efi" ;;
esac
[ -z "$disk_gib" ] || [ -z "$guest" ] || die "DISK_GIB=$disk_gib with GUEST=$guest: a real guest's disk is its image, of the image's size; DISK_GIB sizes the sample VM's"
vms_list=${VMS:-}
read -r -a vms <<<"${vms_list//,/ }"
if [ ${#vms[@]} -eq 0 ]; then
  vms=(web-01)
  [ -z "$guest" ] || vms=("$guest-guest")
fi
for v in "${vms[@]}"; do
  [[ $v =~ ^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$ ]] || die "VMS: $v is not a lowercase DNS label (it names the migration and the target VM too)"
done
vm=${vms[0]}
[ "$(id -u)" = 0 ] || die "the real node needs root"
for tool in go; do
  command -v "$tool" >/dev/null || die "$tool is needed"
done

# --- processes: each in its own process group, stopped by pid -------------
pids=()
names=()
# running PID: the process exists and is not a zombie (a child that exited
# stays one until waited for).
running() {
  local st
  st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
  [[ $st != Z* ]]
}
cleanup() {
  local rc=$?
  # Nothing interrupts the cleanup: not a second Ctrl-C, not a closed
  # terminal, not a reader of our output that is gone (say then fails
  # with EPIPE instead of killing the script before it stopped anything).
  trap '' INT TERM HUP PIPE
  trap - EXIT
  if ((${#pids[@]})); then
    say "stopping ${names[*]}"
    local i deadline
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
      kill -TERM -- "-${pids[i]}" 2>/dev/null || true
      # The node tears its processes, containers, namespaces and cgroups
      # down on SIGTERM: give it time.
      deadline=$((SECONDS + 60))
      while running "${pids[i]}" && ((SECONDS < deadline)); do sleep 0.1; done
      kill -KILL -- "-${pids[i]}" 2>/dev/null || true
      wait "${pids[i]}" 2>/dev/null || true
    done
  fi
  say "stopped (logs in $state/logs)"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
trap 'exit 129' HUP

# start NAME CMD...: runs CMD in a new session (its own process group),
# logging to $state/logs/NAME.log.
start() {
  local name=$1
  shift
  setsid "$@" >"$state/logs/$name.log" 2>&1 </dev/null &
  pids+=("$!")
  names+=("$name")
}

# alive NAME PID: fails with the log's tail when the process died.
alive() {
  running "$2" && return 0
  tail -n 30 "$state/logs/$1.log" >&2 || true
  die "$1 exited"
}

# wait_until WHAT SECONDS CMD...: polls CMD until it succeeds.
wait_until() {
  local what=$1 limit=$2 pid=${pids[-1]} name=${names[-1]}
  shift 2
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    alive "$name" "$pid"
    ((SECONDS < deadline)) || die "$what not ready after ${limit}s (log: $state/logs/$name.log)"
    sleep 0.2
  done
}

# --- build ------------------------------------------------------------------
say "building (or reusing) the control plane and node binaries, CoreDNS, and the node's Debian packages"
testbin=$("$root/hack/build-testbin.sh" | tail -n 1)
# The node's cluster DNS (CoreDNS behind the kube-dns Service).
COREDNS_DIR=$("$root/hack/build-coredns.sh" | tail -n 1)
export COREDNS_DIR
"$root/hack/install-node-deps.sh"
say "building (or reusing) KubeVirt's control plane (about 9 minutes the first time; cached after)"
kubevirt_dir=$("$root/hack/build-kubevirt.sh" | tail -n 1)
kubevirt_node_dir=
if [ "$kubevirt_node" = 1 ]; then
  say "building (or reusing) KubeVirt's node side: virt-handler, virt-launcher and their images (about 15 minutes the first time; cached after)"
  kubevirt_node_dir=$("$root/hack/build-kubevirt-node.sh" | tail -n 1)
fi
say "building (or reusing) CDI, its images and local-path-provisioner (about 30 minutes the first time; cached after)"
cdi_dir=$("$root/hack/build-cdi.sh" | tail -n 1)
cdi_images_dir=$("$root/hack/build-cdi-images.sh" | tail -n 1)
local_path_dir=$("$root/hack/build-local-path.sh" | tail -n 1)
kubevirt_version=$(awk '$1 == "virt-api" { n = split($2, a, ":"); print a[n] }' "$kubevirt_dir/images")
[ -n "$kubevirt_version" ] || die "no virt-api image in $kubevirt_dir/images"
kubectl() { "$testbin/kubectl" "$@"; }
say "building testnode, vcsim-local, the stand-ins and the images into $bin"
mkdir -p "$bin"
(cd "$root" && go build -o "$bin/" ./test/framework/cmd/testnode ./test/vcsimlocal/cmd/vcsim-local \
  ./test/standins/cmd/standins ./test/images/cmd/build-images ./test/framework/cmd/install-kubevirt ./test/framework/cmd/install-cdi \
  ./hack/runlocal ./cmd/kubectl-vmm)
# govc of the project's govmomi, for changing the source VMs
# (docs/contributors/testing.md, The local vCenter): not needed to run.
govc_dir=$("$root/hack/build-govc.sh" | tail -n 1) || { say "warning: building govc failed: the env file puts none on PATH"; govc_dir=; }
imports=()
for d in "$kubevirt_dir" "$kubevirt_node_dir" "$cdi_images_dir" "$local_path_dir"; do
  [ -n "$d" ] || continue
  while read -r _ _ tarball; do imports+=(--import "$d/$tarball"); done <"$d/images"
done
controller_image=
conversion_image=
launcher_image=
while read -r ref tarball; do
  case $ref in
    *controller*) controller_image=$ref ;;
    *launcher*)
      launcher_image=$ref
      # KubeVirt's own virt-launcher image carries that name then.
      [ -n "$kubevirt_node_dir" ] && continue
      ;;
    *) conversion_image=$ref ;;
  esac
  imports+=(--import "$tarball")
done < <(cd "$root" && "$bin/build-images" --launcher "localhost/kubevirt/virt-launcher:$kubevirt_version")
[ -n "$controller_image" ] && [ -n "$conversion_image" ] && [ -n "$launcher_image" ] || die "building the images failed (run $bin/build-images to see why)"
vcsim_args=()
for v in "${vms[@]}"; do vcsim_args+=(--vm "$v"); done
sample_disks="3 disks of random bytes"
if [ -n "$disk_gib" ]; then
  vcsim_args+=(--disk-size "${disk_gib}GiB")
  sample_disks="3 disks of random bytes ($disk_gib GiB, 6 and 4 MiB)"
fi
conversion="SIMULATED virt-v2v (test/images: it converts nothing, but writes 4 MiB into the first disk through the overlay, as a conversion writes; the sample VMs' disks hold random bytes, which the real one refuses)"
if [ -n "$guest" ]; then
  say "building (or reusing) the real guest images and the conversion image"
  "$root/hack/install-conversion-deps.sh"
  images=$("$root/hack/build-guest-images.sh" | tail -n 1)
  vcsim_args+=(--guest-image "$images/$guest.img" --guest-firmware "$guest")
  conversion_image=$(cd "$root" && make --no-print-directory conversion-image | tail -n 1)
  imports+=(--import "$root/_output/conversion-image/vm-migration-conversion.tar")
  conversion="the real virt-v2v (make conversion-image)"
fi
say "images: $controller_image (controller and transfer), $conversion_image (conversion: $conversion)"

rm -rf "$state"
mkdir -p "$state/logs" "$state/vcsim" "$state/standins" "$state/overlay" "$state/migrations" "$state/bin"
if [ -n "$disk_gib" ]; then
  # Each sample VM's image, and the node's volume the example writes it
  # into (its staging overhead included), on the file system of $state.
  need=$((disk_gib * (${#vms[@]} + 1) + 2))
  avail=$(df --output=avail -BG "$state" | tail -n 1 | tr -dc 0-9)
  ((avail >= need)) || die "DISK_GIB=$disk_gib: $state has ${avail} GiB free, the images of ${#vms[@]} VM(s) and the example's volume need about $need GiB"
fi
# The pods' non-root users (65532, 107) reach the volumes under standins/.
chmod 755 "$state" "$state/standins"

# --- the control plane and the real node ------------------------------------
node_args=()
[ -n "$kubevirt_node_dir" ] && node_args=(--kubevirt-node)
start node "$bin/testnode" --env-file "$state/node.env" "${node_args[@]}" \
  --crds "$root/manifests/crd" --crds "$cdi_dir/crds" "${imports[@]}"
wait_until "the control plane and the node" 300 test -s "$state/node.env"
# shellcheck source=/dev/null
. "$state/node.env"
export KUBECONFIG
# The env file puts the testbin's kubectl (the server's version; the
# machine's own may be older) and kubectl-vmm first on PATH.
ln -sfn "$testbin/kubectl" "$state/bin/kubectl"
ln -sfn "$bin/kubectl-vmm" "$state/bin/kubectl-vmm"
[ -z "$govc_dir" ] || ln -sfn "$govc_dir/govc" "$state/bin/govc"
printf 'export KUBECONFIG=%q\nexport PATH=%q:"$PATH"\n' "$KUBECONFIG" "$state/bin" >"$state/env"
say "$(grep -m1 '^real node:' "$state/logs/node.log")"
say "API server and vcsim reachable from pods at $HOST_ADDRESS; images imported into the node"

# --- KubeVirt's control plane --------------------------------------------------
# virt-api and virt-controller as Deployments (test/framework/kubevirt), the
# Multus network the example maps to; virt-handler is the stand-in's.
kubevirt_line=$("$bin/install-kubevirt" --kubeconfig "$KUBECONFIG" --kubevirt-dir "$kubevirt_dir" --kubevirt-node-dir "$kubevirt_node_dir" \
  --network default/backend 2>"$state/logs/kubevirt.log" | tail -n 1) || { tail -n 20 "$state/logs/kubevirt.log" >&2; die "installing KubeVirt failed"; }
if [ -n "$kubevirt_node_dir" ]; then
  say "$kubevirt_line (the real virt-launcher: $(sed -n 's/^suite //p' "$kubevirt_node_dir/BUILD-INFO" | sed 's/ *$//'))"
else
  say "$kubevirt_line; virt-handler simulated (test/standins)"
fi

# --- CDI and the storage --------------------------------------------------------
# local-path-provisioner's volumes live under local-path/ (its helper pods
# make and remove them), then CDI as Deployments (test/framework/cdi).
mkdir -p "$state/local-path"
cdi_line=$("$bin/install-cdi" --kubeconfig "$KUBECONFIG" --cdi-dir "$cdi_dir" --cdi-images-dir "$cdi_images_dir" \
  --local-path-dir "$local_path_dir" --volumes "$state/local-path" 2>"$state/logs/cdi.log" | tail -n 1) ||
  { tail -n 20 "$state/logs/cdi.log" >&2; die "installing CDI and local-path-provisioner failed"; }
say "$cdi_line"

# --- vcsim --------------------------------------------------------------------
start vcsim "$bin/vcsim-local" --address="$HOST_ADDRESS:0" --state-dir="$state/vcsim" "${vcsim_args[@]}"
[ -z "$disk_gib" ] || say "vcsim writing each sample VM's first disk ($disk_gib GiB) into $state/vcsim/disks (about $((10 * disk_gib * ${#vms[@]})) s)"
wait_until "vcsim" $((60 + 20 * ${disk_gib:-0} * ${#vms[@]})) test -s "$state/vcsim/vms.json"
vcsim_url=$(cat "$state/vcsim/url")
# govc reaches vcsim with these; the credentials are read from vcsim's
# files when the env file is sourced, never written into it.
printf 'export GOVC_URL=%q GOVC_TLS_KNOWN_HOSTS=%q\nexport GOVC_USERNAME="$(cat %q)" GOVC_PASSWORD="$(cat %q)"\n' \
  "$vcsim_url" "$state/vcsim/known_hosts" "$state/vcsim/username" "$state/vcsim/password" >>"$state/env"
if [ -n "$guest" ]; then
  say "vcsim on $vcsim_url (VMs ${vms[*]}: the real $guest Debian guest, one disk, one NIC)"
else
  say "vcsim on $vcsim_url (VMs ${vms[*]}: EFI, $sample_disks, 2 NICs)"
fi

# --- the stand-ins ------------------------------------------------------------
standin_args=()
[ -n "$kubevirt_node_dir" ] && standin_args=(--real-kubevirt-node)
start standins "$bin/standins" --kubeconfig="$KUBECONFIG" --root="$state/standins" "${standin_args[@]}" \
  --local-volume-node="$NODE_NAME" --real-kubevirt --real-cdi --real-provisioners=rancher.io/local-path --vmi-start-delay=2s -v=1
wait_until "the stand-ins" 60 kubectl get storageclass standard
if [ -n "$kubevirt_node_dir" ]; then
  say "stand-ins running (test/standins: a StorageClass only; KubeVirt runs the VMs, QEMU under TCG)"
else
  say "simulated virt-handler running (test/standins; virt-controller's launcher pods run QEMU under TCG)"
fi

# --- the controller, as it ships -----------------------------------------------
rel=$(realpath --relative-to="$state/overlay" "$root/manifests")
cat >"$state/overlay/kustomization.yaml" <<EOF
# make run-local's overlay of manifests/: only image references change.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $rel
images:
  - name: platform.example/vm-migration-controller
    newName: ${controller_image%:*}
    newTag: ${controller_image##*:}
patches:
  - target:
      kind: Deployment
      name: migration-controller
    patch: |-
      - op: test
        path: /spec/template/spec/containers/0/args/5
        value: --conversion-image=platform.example/vm-migration-conversion:dev
      - op: replace
        path: /spec/template/spec/containers/0/args/5
        value: --conversion-image=$conversion_image
EOF
kubectl apply -k "$state/overlay" >"$state/logs/kubectl.log" 2>&1 || { cat "$state/logs/kubectl.log" >&2; die "kubectl apply -k $state/overlay failed"; }
kubectl -n vm-migration-system rollout status deployment/migration-controller --timeout=180s >>"$state/logs/kubectl.log" 2>&1 ||
  { kubectl -n vm-migration-system describe pods >&2 || true; die "the controller's Deployment did not become Available"; }
leader=
deadline=$((SECONDS + 60))
until [ -n "$leader" ]; do
  leader=$(kubectl -n vm-migration-system get lease vm-migration-controller -o jsonpath='{.spec.holderIdentity}' 2>/dev/null || true)
  leader=${leader%%_*}
  ((SECONDS < deadline)) || die "no controller pod took the leader Lease within 60s"
  [ -n "$leader" ] || sleep 0.5
done
leader_node=$(kubectl -n vm-migration-system get pod "$leader" -o jsonpath='{.spec.nodeName}')
say "controller: Deployment vm-migration-system/migration-controller Available, pod $leader on node $leader_node"

# --- the example migration ------------------------------------------------------
kubectl create namespace "$namespace" >/dev/null
kubectl label namespace "$namespace" pod-security.kubernetes.io/enforce=restricted >/dev/null
# The Secret is made from files: the password is in no argument and no log.
kubectl create secret generic vcsim-credentials -n "$namespace" \
  --from-file=username="$state/vcsim/username" --from-file=password="$state/vcsim/password" \
  --from-file=thumbprint="$state/vcsim/thumbprint" --from-literal=endpoints="$vcsim_url" >/dev/null
# Opt the Secret in: the controller uses no Secret without this label.
kubectl label secret vcsim-credentials -n "$namespace" migration.platform.example/vsphere-credentials=true >/dev/null
networks='      - source: VM Network
        type: Pod'
if [ -z "$guest" ]; then
  networks+='
      - source: DC0_DVPG0
        type: Multus
        multusNetworkName: default/backend'
fi
# migration NAME: the migration of source VM NAME, as the example's.
migration() {
  cat <<EOF
apiVersion: migration.platform.example/v1alpha1
kind: VirtualMachineMigration
metadata:
  name: $1
  namespace: $namespace
spec:
  source:
    url: $vcsim_url
    credentialsSecretRef:
      name: vcsim-credentials
    datacenter: DC0
    vm:
      name: $1
  target:
    name: $1
    storage:
      default:
        storageClassName: local-path
    networks:
$networks
  staging:
    storageClassName: local-path
  policy:
    shutdown:
      mode: GuestThenPowerOff
      timeout: 10s
EOF
}
for v in "${vms[@]}"; do migration "$v" >"$state/migrations/$v.yaml"; done
cp "$state/migrations/$vm.yaml" "$state/example.yaml"
kubectl apply -f "$state/example.yaml" >/dev/null
say "applied $state/example.yaml (namespace $namespace enforces PodSecurity restricted); following it:"

# Fields separated by "|": a pod not yet scheduled has no node name, which
# whitespace separators would collapse.
pods_template='{range .items[*]}{.metadata.name}{"|"}{.metadata.labels.migration\.platform\.example/component}{"|"}{.spec.nodeName}{"|"}{.status.phase}{"\n"}{end}'
cdi_pods_template='{range .items[*]}{.metadata.name}{"|"}{.metadata.labels.cdi\.kubevirt\.io}{"|"}{.spec.nodeName}{"|"}{.status.phase}{"\n"}{end}'
declare -A pod_seen=()
# show_pods prints each Job pod of the example, and each pod CDI starts to
# serve its DataVolumes (with the DataVolume it serves), once per phase it
# is seen in (the part: the component label of ours, or of CDI's).
show_pods() {
  show_pods_of migration.platform.example/component "$pods_template"
  claim_names=()
  local uid name
  while IFS='|' read -r uid name; do
    [ -n "$uid" ] && claim_names[$uid]=$name
  done < <(kubectl get pvc,dv -n "$namespace" -o jsonpath='{range .items[*]}{.metadata.uid}{"|"}{.metadata.name}{"\n"}{end}' 2>/dev/null || true)
  show_pods_of cdi.kubevirt.io "$cdi_pods_template"
}
declare -A claim_names=()
# served_data_volume POD names the DataVolume a CDI pod serves: its upload
# server is cdi-upload-<DataVolume>; its clone source and size detection
# pods carry the UID of the DataVolume or of its claim (or of its prime
# claim, prime-<UID of the claim>).
served_data_volume() {
  local pod=$1 uid claim
  case $pod in
    cdi-upload-*) echo "${pod#cdi-upload-}"; return ;;
    *-source-pod) uid=${pod%-source-pod} ;;
    size-detection-*) uid=${pod#size-detection-} ;;
    *) return ;;
  esac
  claim=${claim_names[$uid]:-}
  [[ $claim == prime-* ]] && claim=${claim_names[${claim#prime-}]:-}
  echo "$claim"
}
show_pods_of() {
  local name component node phase dv
  while IFS='|' read -r name component node phase; do
    [ -n "$name" ] || continue
    [ "${pod_seen[$name]:-}" = "$node/$phase" ] && continue
    pod_seen[$name]=$node/$phase
    dv=
    [ "$1" = cdi.kubevirt.io ] && dv=$(served_data_volume "$name")
    printf '  %4ds  pod %s/%s (%s) on node %s: %s%s\n' "$((SECONDS - started))" "$namespace" "$name" "$component" "${node:-<none>}" "${phase:-?}" \
      "${dv:+ (DataVolume $dv)}"
  done < <(kubectl get pods -n "$namespace" -l "$1" -o jsonpath="$2" 2>/dev/null || true)
}
last=""
phase=""
deadline=$((SECONDS + timeout))
while :; do
  alive node "${pids[0]}"
  # The example's line (runlocal line): phase, progress, each disk's bytes
  # of its capacity, the last error; "-" for a field with nothing in it.
  line=$(kubectl get vmm "$vm" -n "$namespace" -o json 2>/dev/null | "$bin/runlocal" line 2>/dev/null || true)
  phase=${line%%$'\t'*}
  if [ "$line" != "$last" ]; then
    IFS=$'\t' read -r p progress disks err <<<"$line" || true
    [ "$err" != - ] || err=
    printf '  %4ds  %-18s %-5s %s%s\n' "$((SECONDS - started))" "${p:-?}" "${progress:-}" "${disks:-}" "${err:+  last error: $err}"
    last=$line
  fi
  show_pods
  case $phase in
    Succeeded) break ;;
    Failed)
      kubectl describe vmm "$vm" -n "$namespace" >&2 || true
      kubectl get vmm "$vm" -n "$namespace" -o json | "$bin/runlocal" summary --since-start "$((SECONDS - started))s" >&2 || true
      die "the example migration failed"
      ;;
  esac
  ((SECONDS < deadline)) || die "the example migration did not succeed within ${timeout}s"
  sleep 0.5
done
summary=$(kubectl get vmm "$vm" -n "$namespace" -o json | "$bin/runlocal" summary --since-start "$((SECONDS - started))s") ||
  die "summing up the example migration failed"
while IFS= read -r l; do say "$l"; done <<<"$summary"
kubectl get vmm,vm,vmi,dv -n "$namespace" 2>/dev/null || true

if [ -n "$once" ]; then
  exit 0
fi
# The state folder as the reader types it, from the clone, when inside it.
shown=$(realpath --relative-to="$root" "$state")
[[ $shown == ../* ]] && shown=$state
machine_kubectl=
if machine=$(type -P kubectl); then
  machine_kubectl=$("$machine" version --client -o json 2>/dev/null | sed -n 's/.*"gitVersion": *"\([^"]*\)".*/\1/p' | head -n 1)
  machine_kubectl=${machine_kubectl:-unknown}
fi
hint_vms=()
for v in "${vms[@]}"; do hint_vms+=(--vm "$v"); done
"$bin/runlocal" hints --state "$shown" --namespace "$namespace" --example "$vm" "${hint_vms[@]}" \
  --vcsim-url "$vcsim_url" --server-version "$KUBELET_VERSION" --machine-kubectl "$machine_kubectl" --guest "$guest" >&2
while :; do sleep 1; done
