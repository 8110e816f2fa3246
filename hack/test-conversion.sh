#!/usr/bin/env bash
# make test-conversion: the real guest conversions, end to end.
#
#   1. installs the Debian packages they need when missing (as root:
#      hack/install-conversion-deps.sh, hack/install-node-deps.sh);
#   2. builds the control plane and node binaries, CoreDNS (the node's
#      cluster DNS), KubeVirt's control plane, CDI and its images,
#      local-path-provisioner, the BIOS and EFI Debian
#      guest images and the conversion image (make conversion-image), or
#      reuses them (all cached outside the clone);
#   3. runs the conversion script on disks virt-v2v must refuse (blank,
#      corrupt, Alpine) with the real virt-v2v-in-place;
#   4. migrates each guest from vcsim on the real node (test/e2e,
#      TestMigratedGuestRuns/{bios-ifupdown,efi-networkd}): the
#      controller's Deployment, a real transfer pod, a real conversion pod
#      running the conversion image (virt-v2v-in-place, uid 107, read-only
#      root, no capabilities, in a namespace enforcing PodSecurity
#      restricted), CDI's own clone of the converted disk into a
#      local-path volume (its clone source and upload server pods); then
#      KubeVirt's own virt-api
#      admits the VM and virt-controller renders its launcher pod, where
#      the guest runs (QEMU under TCG; the stand-in plays virt-handler)
#      until its guest agent reports; then a blank disk whose conversion
#      must fail (TestRealGuestBlankDisk).
#
# It prints, per guest, one line
#   real guest: firmware=<bios|efi> os=<distro> <version> converted=<s>s booted=<s>s accel=<kvm|tcg> network=<preserved|lost|unknown> chain=<verified|broken|unknown> rehashed=<disk>=<MiB>MiB/<%>,...
# (rehashed: what the conversion read again for each disk's converted
# checksum, the blocks it wrote; accel is the launcher's; network and chain are unknown while the
# controller sets no NetworkIdentityPreserved condition and records no
# checksum chain)
# and exits non-zero if any step failed or was simulated. GUESTS=bios
# (or GUESTS=bios-ifupdown) limits the guests; FAILING_DISKS=0 skips step 3 (make test does: its
# captured runs are replayed by the unit tests, and the blank disk still
# fails end to end). KUBEVIRT_NODE=1 runs the migrated guests under
# KubeVirt's own node side instead of the stand-in (hack/build-kubevirt-node.sh:
# virt-handler's DaemonSet, the real virt-launcher with trixie's libvirt and
# QEMU): the guests with their static NIC alone, on the pod network
# (bios-pod, efi-pod; a Multus NIC needs the bridge binding's dummy link,
# which this machine's kernel lacks), the serial console read from the
# launcher's guest-console-log container, the guest agent's report from
# virt-handler. The logs, each guest's conversion log and launcher
# log (its serial console) are in _output/test-conversion/.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
out="$root/_output/test-conversion"
rm -rf "$out"
mkdir -p "$out"
guests=${GUESTS:-bios efi}

step() { echo "test-conversion: $*" >&2; }
timed() {
  local name=$1
  shift
  local s=$SECONDS
  "$@"
  step "$name: $((SECONDS - s))s"
}

timed "packages" hack/install-conversion-deps.sh
timed "node packages" hack/install-node-deps.sh
timed "control-plane and node binaries" hack/build-testbin.sh >/dev/null
coredns=$(timed "CoreDNS (the node's cluster DNS)" hack/build-coredns.sh | tail -n 1)
kubevirt=$(timed "KubeVirt's control plane" hack/build-kubevirt.sh | tail -n 1)
kubevirt_node=
if [ "${KUBEVIRT_NODE:-}" = 1 ]; then
  kubevirt_node=$(timed "KubeVirt's node side" hack/build-kubevirt-node.sh | tail -n 1)
fi
cdi=$(timed "CDI" hack/build-cdi.sh | tail -n 1)
cdi_images=$(timed "CDI's images" hack/build-cdi-images.sh | tail -n 1)
local_path=$(timed "local-path-provisioner" hack/build-local-path.sh | tail -n 1)
images=$(timed "guest images" hack/build-guest-images.sh | tail -n 1)
timed "conversion image" make --no-print-directory conversion-image >/dev/null

status=0
if [ "${FAILING_DISKS:-1}" != 0 ]; then
  step "conversions that must fail (log: $out/failures.log)"
  s=$SECONDS
  go test -count=1 -tags conversion -timeout 30m -run TestRealConversionFailures -v ./pkg/steps/pipeline/ >"$out/failures.log" 2>&1 || status=1
  grep -E '^\s+--- (PASS|FAIL)' "$out/failures.log" >&2 || true
  step "conversions that must fail: $((SECONDS - s))s"
fi

step "real guests $guests (log: $out/e2e.log)"
s=$SECONDS
GUESTS=$guests GUEST_IMAGES=$images REAL_GUEST_REPORT="$out/report.txt" REAL_GUEST_ARTIFACTS="$out" \
  TESTBIN_DIR="$root/_output/testbin" COREDNS_DIR="$coredns" KUBEVIRT_DIR="$kubevirt" CDI_DIR="$cdi" \
  CDI_IMAGES_DIR="$cdi_images" LOCAL_PATH_DIR="$local_path" KUBEVIRT_NODE_DIR="$kubevirt_node" \
  go test -count=1 -tags e2e,conversion -timeout 120m -run '^(TestMigratedGuestRuns|TestRealGuestBlankDisk)$' -v ./test/e2e/ >"$out/e2e.log" 2>&1 || status=1
grep -E '^\s*--- (PASS|FAIL)' "$out/e2e.log" >&2 || true
step "end to end: $((SECONDS - s))s"

cat "$out/report.txt" 2>/dev/null || true
for g in $guests; do
  if ! grep -q "^real guest: firmware=${g%%-*} " "$out/report.txt" 2>/dev/null; then
    step "no result for the $g guest"
    status=1
  fi
done
if [ "$status" != 0 ]; then
  step "FAILED: see $out/failures.log and $out/e2e.log"
fi
exit "$status"
