#!/usr/bin/env bash
# The conversion image's proof without a node: runs its root file system
# as the conversion pod the controller renders would run (runc, a bundle
# made from the pod spec: uid/gid 107, fsGroup, read-only root, no
# capabilities, no new privileges, the pod's volumes and limits; /dev/kvm
# as the test node's "kvm" RuntimeClass offers it where the machine has
# one), and converts the real BIOS Debian guest with the pod's own script
# and domain XML, then boots the result (package podcheck, build tag
# conversion).
#
#   1. installs runc and the conversion test packages when missing (root);
#   2. builds (or reuses) the guest images and the conversion image;
#   3. runs TestConversionPod: the pod's view of itself, the image's
#      self-check with an appliance boot, the conversion, the boot.
#
# Prints the report (also in _output/conversion-podcheck/report.txt, with
# the conversion's log and the test's) and exits non-zero on failure.
# About 15 minutes with the images cached, on 2 busy cores.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
out="$root/_output/conversion-podcheck"
rm -rf "$out"
mkdir -p "$out"

hack/install-conversion-deps.sh
hack/install-debian-packages.sh runc >&2
guests=$(hack/build-guest-images.sh | tail -n 1)
image=$(hack/conversion-image/build.sh | tail -n 1)

echo "conversion pod check with $image (log: $out/test.log)" >&2
status=0
PODCHECK_REPORT="$out/report.txt" PODCHECK_ARTIFACTS="$out" GUEST_IMAGES="$guests" \
  CONVERSION_IMAGE="$image" CONVERSION_IMAGE_LAYOUT="$root/_output/conversion-image/oci" \
  go test -count=1 -tags conversion -timeout 90m -run '^TestConversionPod$' -v ./hack/conversion-image/podcheck/ \
  >"$out/test.log" 2>&1 || status=1
cat "$out/report.txt" 2>/dev/null || true
grep -E '^\s*--- (PASS|FAIL)' "$out/test.log" >&2 || true
[ "$status" = 0 ] || echo "conversion pod check FAILED: see $out/test.log" >&2
exit "$status"
