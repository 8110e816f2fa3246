#!/usr/bin/env bash
# Runs the whole migration stack on this machine, on 127.0.0.1 only, with no
# container runtime: etcd, kube-apiserver and kube-controller-manager (built
# by hack/build-testbin.sh), vcsim with a sample VM whose disks hold real
# bytes (test/vcsimlocal), the migration controller (as its ServiceAccount
# under manifests/rbac.yaml), and the SIMULATED kubelet, storage, CDI and
# KubeVirt of test/standins, which run the real vm-transfer command. It then
# applies an example migration and shows its phase and per-disk progress
# until it succeeds.
#
#   hack/run-local.sh          leaves the stack up (prints export KUBECONFIG=...);
#                              Ctrl-C stops everything
#   ONCE=1 hack/run-local.sh   no terminal needed: tears down and exits 0 only
#                              if the example migration succeeded
#
# State, logs and the kubeconfig live in _output/run-local (RUN_LOCAL_DIR).
# Binaries are built into _output/local/bin; a second run reuses them and
# the Go build cache.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
state=${RUN_LOCAL_DIR:-$root/_output/run-local}
bin=$root/_output/local/bin
once=${ONCE:-}
timeout=${RUN_LOCAL_TIMEOUT:-300}
transfer_image=platform.example/vm-migration-controller:local
conversion_image=standins.platform.example/virt-v2v:simulated
started=$SECONDS

say() { printf '[run-local %3ds] %s\n' "$((SECONDS - started))" "$*" >&2 || true; }
die() { say "error: $*"; exit 1; }

for tool in go curl openssl kubectl; do
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
      deadline=$((SECONDS + 10))
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

free_port() {
  if command -v python3 >/dev/null; then
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
    return
  fi
  local p
  while :; do
    p=$((20000 + RANDOM % 20000))
    ss -ltn "sport = :$p" | grep -q LISTEN || { echo "$p"; return; }
  done
}

# --- build ------------------------------------------------------------------
say "building (or reusing) kube-apiserver, kube-controller-manager and etcd"
testbin=$("$root/hack/build-testbin.sh" | tail -n 1)
say "building the controller, vm-transfer, vcsim-local and the stand-ins into $bin"
mkdir -p "$bin"
(cd "$root" && go build -o "$bin/" ./cmd/migration-controller ./cmd/vm-transfer \
  ./test/vcsimlocal/cmd/vcsim-local ./test/standins/cmd/standins)

rm -rf "$state"
mkdir -p "$state/logs" "$state/certs" "$state/vcsim" "$state/standins"
chmod 700 "$state"
export KUBECONFIG=$state/kubeconfig

# --- etcd -------------------------------------------------------------------
etcd_port=$(free_port)
peer_port=$(free_port)
start etcd "$testbin/etcd" --name=local --data-dir="$state/etcd" \
  --listen-client-urls="http://127.0.0.1:$etcd_port" --advertise-client-urls="http://127.0.0.1:$etcd_port" \
  --listen-peer-urls="http://127.0.0.1:$peer_port" --initial-advertise-peer-urls="http://127.0.0.1:$peer_port" \
  --initial-cluster="local=http://127.0.0.1:$peer_port" --initial-cluster-state=new \
  --unsafe-no-fsync=true --log-level=warn
wait_until "etcd" 30 curl -fsS "http://127.0.0.1:$etcd_port/health"
say "etcd on 127.0.0.1:$etcd_port"

# --- kube-apiserver ---------------------------------------------------------
api_port=$(free_port)
token=$(openssl rand -hex 16)
(umask 077 && printf '%s,local-admin,local-admin,"system:masters"\n' "$token" >"$state/tokens.csv")
openssl genrsa -out "$state/sa.key" 2048 2>/dev/null
start kube-apiserver "$testbin/kube-apiserver" --etcd-servers="http://127.0.0.1:$etcd_port" \
  --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$api_port" \
  --cert-dir="$state/certs" --token-auth-file="$state/tokens.csv" --authorization-mode=RBAC \
  --service-account-key-file="$state/sa.key" --service-account-signing-key-file="$state/sa.key" \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-cluster-ip-range=10.0.0.0/24 --disable-admission-plugins=ServiceAccount \
  --endpoint-reconciler-type=none
ca=$state/certs/apiserver.crt
readyz() { [ -s "$ca" ] && curl -fsS --cacert "$ca" -H "Authorization: Bearer $token" "https://127.0.0.1:$api_port/readyz"; }
wait_until "kube-apiserver" 90 readyz
kubectl config set-cluster local --server="https://127.0.0.1:$api_port" --certificate-authority="$ca" --embed-certs >/dev/null
kubectl config set-credentials local-admin --token="$token" >/dev/null
kubectl config set-context local --cluster=local --user=local-admin --namespace=default >/dev/null
kubectl config use-context local >/dev/null
say "kube-apiserver on 127.0.0.1:$api_port"

# --- kube-controller-manager (the real Job controller, garbage collector...) -
kcm_port=$(free_port)
start kube-controller-manager "$testbin/kube-controller-manager" --kubeconfig="$KUBECONFIG" \
  --authentication-kubeconfig="$KUBECONFIG" --authorization-kubeconfig="$KUBECONFIG" \
  --leader-elect=false --controllers='*' --use-service-account-credentials=false \
  --service-account-private-key-file="$state/sa.key" --root-ca-file="$ca" \
  --bind-address=127.0.0.1 --secure-port="$kcm_port" --cert-dir="$state/kcm-certs" --cluster-name=local
wait_until "kube-controller-manager" 60 curl -fsSk "https://127.0.0.1:$kcm_port/healthz"
say "kube-controller-manager on 127.0.0.1:$kcm_port"

# --- CRDs and the controller's identity ---------------------------------------
kubectl apply -f "$root/manifests/crd" -f "$root/test/crds" >/dev/null 2>"$state/logs/kubectl.log"
kubectl wait --for condition=established --timeout=60s crd --all >/dev/null 2>>"$state/logs/kubectl.log"
kubectl apply -f "$root/manifests/base/namespace.yaml" -f "$root/manifests/base/serviceaccount.yaml" -f "$root/manifests/rbac.yaml" >/dev/null 2>>"$state/logs/kubectl.log"
say "CRDs installed (ours, KubeVirt's and CDI's), controller RBAC applied"

# --- vcsim --------------------------------------------------------------------
vcsim_port=$(free_port)
start vcsim "$bin/vcsim-local" --address="127.0.0.1:$vcsim_port" --state-dir="$state/vcsim" --vm=web-01
wait_until "vcsim" 60 test -s "$state/vcsim/vms.json"
vcsim_url=$(cat "$state/vcsim/url")
say "vcsim on $vcsim_url (VM web-01: EFI, 3 disks with real bytes, 2 NICs)"

# --- the stand-ins ------------------------------------------------------------
start standins "$bin/standins" --kubeconfig="$KUBECONFIG" --root="$state/standins" \
  --transfer-image="$transfer_image" --transfer-binary="$bin/vm-transfer" \
  --conversion-duration=3s --clone-bytes-per-second=$((4 << 20)) --vmi-start-delay=2s -v=1
wait_until "the stand-ins" 30 kubectl get node standin-node
say "simulated kubelet, storage, CDI and KubeVirt running (test/standins)"

# --- the controller, as its ServiceAccount ------------------------------------
ctrl_kubeconfig=$state/controller.kubeconfig
sa_token=$(kubectl create token migration-controller -n vm-migration-system --duration=24h)
cp "$KUBECONFIG" "$ctrl_kubeconfig"
KUBECONFIG=$ctrl_kubeconfig kubectl config set-credentials local-admin --token="$sa_token" >/dev/null
metrics_port=$(free_port)
health_port=$(free_port)
start migration-controller "$bin/migration-controller" --kubeconfig="$ctrl_kubeconfig" \
  --transfer-image="$transfer_image" --conversion-image="$conversion_image" --transfer-progress=true \
  --poll-interval=2s --wait-interval=5s \
  --metrics-bind-address="127.0.0.1:$metrics_port" --health-probe-bind-address="127.0.0.1:$health_port"
wait_until "the controller" 60 curl -fsS "http://127.0.0.1:$health_port/readyz"
say "migration controller running (metrics on 127.0.0.1:$metrics_port)"

# --- the example migration ------------------------------------------------------
# The Secret is made from files: the password is in no argument and no log.
kubectl create secret generic vcsim-credentials -n default \
  --from-file=username="$state/vcsim/username" --from-file=password="$state/vcsim/password" \
  --from-file=thumbprint="$state/vcsim/thumbprint" --from-literal=endpoints="$vcsim_url" >/dev/null
# Opt the Secret in: the controller uses no Secret without this label.
kubectl label secret vcsim-credentials -n default migration.platform.example/vsphere-credentials=true >/dev/null
cat >"$state/example.yaml" <<EOF
apiVersion: migration.platform.example/v1alpha1
kind: VirtualMachineMigration
metadata:
  name: web-01
  namespace: default
spec:
  source:
    url: $vcsim_url
    credentialsSecretRef:
      name: vcsim-credentials
    datacenter: DC0
    vm:
      name: web-01
  target:
    name: web-01
    storage:
      default:
        storageClassName: standard
    networks:
      - source: VM Network
        type: Pod
      - source: DC0_DVPG0
        type: Multus
        multusNetworkName: default/backend
  staging:
    storageClassName: standard
  policy:
    shutdown:
      mode: GuestThenPowerOff
      timeout: 10s
EOF
kubectl apply -f "$state/example.yaml" >/dev/null
say "applied $state/example.yaml; following it:"

status_template='{.status.phase}{"\t"}{.status.progress}{"\t"}{range .status.disks[*]}{.name}={.bytesTransferred}/{.capacityBytes}{" "}{.importPhase}{" "}{.importProgress}{"; "}{end}{"\t"}{.status.lastError.message}'
last=""
phase=""
deadline=$((SECONDS + timeout))
while :; do
  alive migration-controller "${pids[-1]}"
  line=$(kubectl get vmm web-01 -n default -o jsonpath="$status_template" 2>/dev/null || true)
  phase=${line%%$'\t'*}
  if [ "$line" != "$last" ]; then
    IFS=$'\t' read -r p progress disks err <<<"$line" || true
    printf '  %4ds  %-18s %-5s %s%s\n' "$((SECONDS - started))" "${p:-?}" "${progress:-}" "${disks:-}" "${err:+  last error: $err}"
    last=$line
  fi
  case $phase in
    Succeeded) break ;;
    Failed) kubectl describe vmm web-01 -n default >&2 || true; die "the example migration failed" ;;
  esac
  ((SECONDS < deadline)) || die "the example migration did not succeed within ${timeout}s"
  sleep 0.5
done
say "the example migration succeeded in $((SECONDS - started))s in all"
kubectl get vmm,vm,vmi,dv -n default 2>/dev/null || true

if [ -n "$once" ]; then
  exit 0
fi
cat >&2 <<EOF

The stack stays up. In another terminal:

  export KUBECONFIG=$KUBECONFIG
  kubectl get vmm,vm,vmi,dv,pvc -A
  kubectl describe vmm web-01

Logs: $state/logs   Ctrl-C stops everything.
EOF
while :; do sleep 1; done
