#!/usr/bin/env bash
# Builds MPI Operator (github.com/kubeflow/mpi-operator/cmd/mpi-operator, the MPIJob v2beta1
# controller) from the wrapper module next to this script, and caches it with the MPIJob CRD of
# the same release. The e2e suite runs it on the host against the local cluster with
# --gang-scheduling=finegrain-placer (test/e2e/mpioperator_test.go).
#
# Usage: hack/mpi-operator/build.sh
# Prints the directory holding the mpi-operator binary and mpijobs-crd.yaml (the release's
# manifests/base/kubeflow.org_mpijobs.yaml, from the module) on stdout. Progress goes to stderr.
#
# The cache key is the MPI Operator version and a hash of go.mod and go.sum: a second run with the
# same files returns at once; changing either builds afresh (hack/lib/cachedbuild.sh: where the
# cache lives, the lock, nice).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BUILD_NAME=mpi-operator-build
. "$here/../lib/cachedbuild.sh"

module=github.com/kubeflow/mpi-operator
version="$(module_version "$here/go.mod" "$module")"
bin=mpi-operator
crd=mpijobs-crd.yaml

complete() { [ -x "$1/$bin" ] && [ -f "$1/$crd" ]; }

build() {
  local src
  go_build_module "$here" "$1/$bin" "$module/cmd/mpi-operator" || return 1
  src="$(cd "$here" && GOWORK=off GOFLAGS=-mod=readonly go list -m -f '{{.Dir}}' "$module")" || {
    echo "cannot find the source of $module $version in the module cache" >&2
    return 1
  }
  cp "$src/manifests/base/kubeflow.org_mpijobs.yaml" "$1/$crd" || {
    echo "$module $version has no manifests/base/kubeflow.org_mpijobs.yaml to install the MPIJob CRD from" >&2
    return 1
  }
  chmod 644 "$1/$crd"
  check_runs "$1/$bin" --version
}

cached_build "MPI Operator $version" \
  "$BUILD_CACHE/mpi-operator/$version-$(content_key "$here/go.mod" "$here/go.sum")" complete build
