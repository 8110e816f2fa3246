#!/usr/bin/env bash
# A CONTROL-PLANE benchmark of the migration controller: N migrations at
# once (default 1000) against a real etcd, kube-apiserver and
# kube-controller-manager, vcsim with N VMs spread over several ESXi hosts,
# and the stand-ins of test/standins in light mode (transfer pods end at
# once with a complete result, clones and VM starts complete at once: no
# disk bytes move). The controller runs as its own process with its
# production flags; its API requests are counted through a reverse proxy,
# its vSphere calls by vcsim. The driver is hack/benchscale (go doc it).
#
# Environment: N (1000), HOSTS (10), QUIET (1m: reconciles of finished
# migrations are counted over it; shorten it for quick runs only),
# TIMEOUT (3h), CONTROLLER_ARGS (extra controller flags), WORK_DIR (keep
# logs there; default a temporary directory, removed).
#
# The last line reads:
#   scale: N=<n> succeeded=<n> writes/migration=<w> p99 reconcile=<ms> ms, peak RSS=<MiB> MiB
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
N=${N:-1000}
HOSTS=${HOSTS:-10}
QUIET=${QUIET:-1m}
TIMEOUT=${TIMEOUT:-3h}
bin=$root/_output/bench-scale/bin

testbin=$("$root/hack/build-testbin.sh" | tail -n 1)
mkdir -p "$bin"
go build -o "$bin/" ./cmd/migration-controller ./hack/benchscale
exec env TESTBIN_DIR="$testbin" "$bin/benchscale" -n "$N" --hosts "$HOSTS" --quiet "$QUIET" --timeout "$TIMEOUT" \
  --controller-binary "$bin/migration-controller" --controller-args "${CONTROLLER_ARGS:-}" ${WORK_DIR:+--work-dir "$WORK_DIR"}
