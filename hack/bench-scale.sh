#!/usr/bin/env bash
# A CONTROL-PLANE benchmark of the migration controller: N migrations at
# once (default 1000) against a real etcd, kube-apiserver and
# kube-controller-manager, vcsim with N VMs spread over several ESXi hosts,
# and the stand-ins of test/standins in light mode (transfer pods end at
# once with a complete result, clones and VM starts complete at once: no
# disk bytes move). The controller runs as its own process with its
# production flags (and --profiling), bounded as its Deployment bounds it:
# in a memory cgroup of its own with the Deployment's memory limit, so the
# soft memory limit it derives applies; its API requests are counted
# through a reverse proxy, its vSphere calls by vcsim. The driver is
# hack/benchscale (go doc it).
#
# Environment: N (1000), HOSTS (10), QUIET (1m: reconciles of finished
# migrations are counted over it; shorten it for quick runs only),
# TIMEOUT (3h), MEMLIMIT (the controller's memory limit: "deployment", the
# default, reads manifests/base/deployment.yaml (512Mi); a quantity such
# as 1Gi; 0 runs it without a cgroup and without a limit; the cgroup, a
# child of the benchmark's own in the cgroup v1 memory hierarchy, needs
# root and is removed at the end), CONTROLLER_ARGS (extra controller
# flags), WORK_DIR (keep logs and the controller's final heap profile
# there; default a temporary directory, removed), NODE_CPU (the simulated
# node's allocatable CPU, default 1000: conversion pods beyond what it
# holds wait Pending Unschedulable, as kube-scheduler leaves them, until a
# placed one ends), CONVERSION_TIME (how long a placed conversion pod
# runs, default 0: at once), PACING=compare (run twice on this machine,
# first with --max-conversions=0, the stops paced by transfer slots only,
# then as CONTROLLER_ARGS say, paced by conversion capacity too, and
# compare the outage per migration).
#
#   make bench-scale N=5000 HOSTS=20               # under the Deployment's memory limit
#   make bench-scale N=5000 HOSTS=20 MEMLIMIT=0    # without a limit
#   make bench-scale N=60 NODE_CPU=2 CONVERSION_TIME=5s QUIET=5s PACING=compare
#
# The last line reads:
#   scale: N=<n> succeeded=<n> writes/migration=<w> p99 reconcile=<ms> ms, own p99=<ms> ms, api p99=<ms> ms, peak RSS=<MiB> MiB, live heap=<MiB> MiB
# and with PACING=compare the last two:
#   pacing <without|with> (<controller flags>): outage per migration (...): p50 <s> s, max <s> s; ...
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
N=${N:-1000}
HOSTS=${HOSTS:-10}
QUIET=${QUIET:-1m}
TIMEOUT=${TIMEOUT:-3h}
MEMLIMIT=${MEMLIMIT:-deployment}
bin=$root/_output/bench-scale/bin

testbin=$("$root/hack/build-testbin.sh" | tail -n 1)
mkdir -p "$bin"
go build -o "$bin/" ./cmd/migration-controller ./hack/benchscale
run() {
  env TESTBIN_DIR="$testbin" "$bin/benchscale" -n "$N" --hosts "$HOSTS" --quiet "$QUIET" --timeout "$TIMEOUT" --memory-limit "$MEMLIMIT" \
    --node-cpu "${NODE_CPU:-1000}" --conversion-time "${CONVERSION_TIME:-0}" \
    --controller-binary "$bin/migration-controller" --controller-args "$1" ${WORK_DIR:+--work-dir "$WORK_DIR/$2"}
}
if [ "${PACING:-}" != compare ]; then
  run "${CONTROLLER_ARGS:-}" .
  exit
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
without="${CONTROLLER_ARGS:-} --max-conversions=0"
with="${CONTROLLER_ARGS:-}"
run "$without" without | tee "$out/without"
run "$with" with | tee "$out/with"
echo "pacing without ($(echo $without)): $(grep '^outage per migration' "$out/without")"
echo "pacing with (${with:-the defaults: --max-conversions=auto}): $(grep '^outage per migration' "$out/with")"
