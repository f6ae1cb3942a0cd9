#!/usr/bin/env bash
# Builds the scheduler-plugins scheduler (sigs.k8s.io/scheduler-plugins/cmd/scheduler: the
# kube-scheduler with NodeResourceTopologyMatch, Coscheduling and the other out-of-tree plugins)
# from the wrapper module next to this script, and caches the binary. The e2e suite runs it beside
# the placer as a second scheduler (test/e2e/schedulerplugins_test.go).
#
# Usage: hack/scheduler-plugins/build.sh
# Prints the directory holding the kube-scheduler-plugins binary on stdout. Progress goes to
# stderr.
#
# The cache key is the scheduler-plugins version and a hash of go.mod and go.sum: a second run with
# the same files returns at once; changing either builds afresh (hack/lib/cachedbuild.sh: where the
# cache lives, the lock, nice). The module pins k8s.io/kubernetes and its staging modules to the
# versions hack/k8s/go.mod builds the cluster from, so after hack/k8s/build.sh the Go build cache
# already holds most of the packages.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BUILD_NAME=scheduler-plugins-build
. "$here/../lib/cachedbuild.sh"

version="$(module_version "$here/go.mod" sigs.k8s.io/scheduler-plugins)"
bin=kube-scheduler-plugins

complete() { [ -x "$1/$bin" ]; }

build() {
  go_build_module "$here" "$1/$bin" sigs.k8s.io/scheduler-plugins/cmd/scheduler && check_runs "$1/$bin" --version
}

cached_build "scheduler-plugins $version" \
  "$BUILD_CACHE/scheduler-plugins/$version-$(content_key "$here/go.mod" "$here/go.sum")" complete build
