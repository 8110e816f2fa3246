#!/usr/bin/env bash
# Checks the alerting rules that manifests/monitoring ships and runs their
# unit tests with promtool (Debian package prometheus, installed when
# missing): the spec of prometheusrule.yaml becomes a plain rule file beside
# a copy of alerts_test.yaml.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=$root/manifests/monitoring

if ! command -v promtool >/dev/null; then
  echo "test-alerts: installing promtool (Debian package prometheus)" >&2
  "$root/hack/install-debian-packages.sh" prometheus >&2
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$root" && go run ./hack/rulespec "$dir/prometheusrule.yaml") >"$tmp/rules.yaml"
cp "$dir/alerts_test.yaml" "$tmp/"
cd "$tmp"
promtool check rules rules.yaml
promtool test rules alerts_test.yaml
