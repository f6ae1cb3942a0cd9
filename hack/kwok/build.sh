#!/usr/bin/env bash
# Installs kwok (sigs.k8s.io/kwok/cmd/kwok: the fake nodes' kubelet of make bench-placer-scale and
# of make e2e's chaos test) at $KWOK_VERSION with go install, which builds it against the module's
# own go.mod, and caches the binary.
#
# Usage: KWOK_VERSION=v0.7.0 hack/kwok/build.sh
# Prints the path of the kwok binary on stdout. Progress goes to stderr.
#
# The cache key is the version: a second run returns at once (hack/lib/cachedbuild.sh: where the
# cache lives, the lock, nice).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BUILD_NAME=kwok-build
. "$here/../lib/cachedbuild.sh"

version="${KWOK_VERSION:?set KWOK_VERSION to the kwok release to install, e.g. v0.7.0}"
[[ "$version" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "KWOK_VERSION=$version: give a release as vMAJOR.MINOR.PATCH"

complete() { [ -x "$1/kwok" ]; }

build() {
  GOBIN="$1" GOWORK=off GOFLAGS=-buildvcs=false CGO_ENABLED=0 nice -n 10 \
    go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$version" && check_runs "$1/kwok" --version
}

BUILD_HINT="go install, a minute or more"
echo "$(cached_build "kwok $version" "$BUILD_CACHE/kwok/$version" complete build)/kwok"
