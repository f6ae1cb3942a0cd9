#!/usr/bin/env bash
# Builds the Kubernetes components of the local cluster (kube-apiserver, kube-controller-manager,
# kube-scheduler, kubelet, kubectl) from the wrapper module next to this script, and caches them.
#
# Usage: hack/k8s/build.sh
# Prints the directory holding the binaries on stdout. Progress goes to stderr.
#
# The cache key is the Kubernetes version and a hash of go.mod + go.sum: a second run with the
# same module files returns at once; editing a replace line builds afresh (hack/lib/cachedbuild.sh:
# where the cache lives, the lock, nice).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BUILD_NAME=k8s-build
. "$here/../lib/cachedbuild.sh"

version="$(module_version "$here/go.mod" k8s.io/kubernetes)"
[[ "$version" =~ ^v([0-9]+)\.([0-9]+)\. ]]
major="${BASH_REMATCH[1]}"
minor="${BASH_REMATCH[2]}"
components=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)

complete() {
  local c
  for c in "${components[@]}"; do [ -x "$1/$c" ] || return 1; done
}

build() {
  # Unstamped, the servers report v0.0.0-master+$Format:%H$ and kubectl refuses to parse it.
  local stamp="" pkg c pkgs=()
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    stamp+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    stamp+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  done
  for c in "${components[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  go_build_module "$here" "$1/" "${pkgs[@]}" -- "${stamp# }"
}

BUILD_HINT="cold: about 6 minutes on 2 idle cores" \
  cached_build "${components[*]} $version" \
  "$BUILD_CACHE/kubernetes/$version-$(content_key "$here/go.mod" "$here/go.sum")" complete build
