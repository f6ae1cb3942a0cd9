#!/usr/bin/env bash
# Builds containerd 2.x (containerd, ctr and containerd-shim-runc-v2) for the local cluster's
# CONTAINERD=2 option (containerd with NRI, so the node agent pins containers at their creation)
# with plain `go install` from the module proxy, and caches the binaries.
#
# Usage: hack/cluster/containerd2.sh [--quiet]
# Prints the directory holding the binaries as the last line of stdout. Progress goes to stderr.
#
# Environment:
#   CONTAINERD2_VERSION   module version to build (default v2.4.2, the version the NRI plugin is
#                         tested against)
#   FINEGRAIN_CACHE       cache root (default ~/.cache/finegrain); the binaries go to
#                         $FINEGRAIN_CACHE/containerd/<version>/
# A cached version returns at once (hack/lib/cachedbuild.sh: the lock, nice). Cold: about 2
# minutes on 2 idle cores (4 on busy ones).
set -euo pipefail

BUILD_QUIET=0
[ "${1:-}" = "--quiet" ] && BUILD_QUIET=1
BUILD_NAME=containerd2
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/cachedbuild.sh"

version="${CONTAINERD2_VERSION:-v2.4.2}"
[[ "$version" =~ ^v2\.[0-9]+\.[0-9]+$ ]] || die "CONTAINERD2_VERSION=$version: want v2.MINOR.PATCH"
bins=(containerd ctr containerd-shim-runc-v2)

complete() {
  local b
  for b in "${bins[@]}"; do [ -x "$1/$b" ] || return 1; done
}

build() {
  local b pkgs=()
  for b in "${bins[@]}"; do pkgs+=("github.com/containerd/containerd/v2/cmd/$b@$version"); done
  # Outside any module, so the tree's go.mod plays no part.
  (cd "$1" && GOWORK=off GOBIN="$1" nice -n 10 go install "${pkgs[@]}") && "$1/containerd" --version >&2
}

cached_build "containerd $version" "$BUILD_CACHE/containerd/$version" complete build
