#!/usr/bin/env bash
# Builds the local cluster's DNS server (CoreDNS, with the plugins main.go names) from the
# wrapper module next to this script, and caches the binary.
#
# Usage: hack/coredns/build.sh
# Prints the directory holding the coredns binary on stdout. Progress goes to stderr.
#
# The cache key is the CoreDNS version and a hash of go.mod, go.sum and main.go (main.go picks the
# plugins): a second run with the same files returns at once; changing any of them builds afresh
# (hack/lib/cachedbuild.sh: where the cache lives, the lock, nice). Cold (empty module and build
# caches): 85 s on 2 cores, module downloads included; minutes on a loaded machine.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BUILD_NAME=coredns-build
. "$here/../lib/cachedbuild.sh"

version="$(module_version "$here/go.mod" github.com/coredns/coredns)"

complete() { [ -x "$1/coredns" ]; }

build() {
  go_build_module "$here" "$1/coredns" . && check_runs "$1/coredns" -plugins
}

cached_build "CoreDNS $version" \
  "$BUILD_CACHE/coredns/$version-$(content_key "$here/go.mod" "$here/go.sum" "$here/main.go")" complete build
