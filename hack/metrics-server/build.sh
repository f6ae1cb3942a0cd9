#!/usr/bin/env bash
# Builds metrics-server (sigs.k8s.io/metrics-server/cmd/metrics-server) from the wrapper module
# next to this script, and caches the binary. make bench-dc-objective runs it on the host against
# the local cluster's kubelets, so that the HorizontalPodAutoscaler arm of the bench has the
# resource metrics API (bench/dcobjective/metrics-server.sh).
#
# Usage: hack/metrics-server/build.sh
# Prints the directory holding the metrics-server binary on stdout. Progress goes to stderr.
#
# The cache key is the metrics-server version and a hash of go.mod and go.sum: a second run with
# the same files returns at once; changing either builds afresh (hack/lib/cachedbuild.sh: where
# the cache lives, the lock, nice).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BUILD_NAME=metrics-server-build
. "$here/../lib/cachedbuild.sh"

version="$(module_version "$here/go.mod" sigs.k8s.io/metrics-server)"
bin=metrics-server

complete() { [ -x "$1/$bin" ]; }

build() {
  go_build_module "$here" "$1/$bin" sigs.k8s.io/metrics-server/cmd/metrics-server && check_runs "$1/$bin" --version
}

cached_build "metrics-server $version" \
  "$BUILD_CACHE/metrics-server/$version-$(content_key "$here/go.mod" "$here/go.sum")" complete build
