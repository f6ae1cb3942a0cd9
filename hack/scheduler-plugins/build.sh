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
# The cache lives outside git, in $FINEGRAIN_CACHE (default ~/.cache/finegrain), under a key made
# of the scheduler-plugins version and a hash of go.mod and go.sum: a second run with the same
# files returns at once; changing either builds afresh. Builds run under `nice -n 10` with a lock,
# so two callers at the same time build once. The module pins k8s.io/kubernetes and its staging
# modules to the versions hack/k8s/go.mod builds the cluster from, so after hack/k8s/build.sh
# the Go build cache already holds most of the packages.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

say() { echo "scheduler-plugins-build: $*" >&2; }
die() { echo "scheduler-plugins-build: $*" >&2; exit 1; }

command -v go >/dev/null || die "go is not on PATH; install Go 1.26 into /usr/local/go and add /usr/local/go/bin to PATH"
command -v flock >/dev/null || die "flock is missing; install the Debian package util-linux"

version="$(awk '$1 == "require" && $2 == "sigs.k8s.io/scheduler-plugins" { print $3 }
  $1 == "sigs.k8s.io/scheduler-plugins" && $2 ~ /^v/ { print $2 }' "$here/go.mod")"
[[ "$version" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] ||
  die "$here/go.mod does not require sigs.k8s.io/scheduler-plugins vMAJOR.MINOR.PATCH (found '${version}')"

key="$(cat "$here/go.mod" "$here/go.sum" | sha256sum | cut -c1-12)"
cache="${FINEGRAIN_CACHE:-$HOME/.cache/finegrain}"
dest="$cache/scheduler-plugins/$version-$key"
bin=kube-scheduler-plugins

if [ -x "$dest/$bin" ]; then
  say "using cached scheduler-plugins $version in $dest"
  echo "$dest"
  exit 0
fi

mkdir -p "$cache/scheduler-plugins"
exec 9>"$cache/scheduler-plugins/.build.lock"
if ! flock -n 9; then
  say "another build holds $cache/scheduler-plugins/.build.lock; waiting for it"
  flock 9
fi
if [ -x "$dest/$bin" ]; then
  say "another build finished $dest while this one waited"
  echo "$dest"
  exit 0
fi

tmp="$(mktemp -d "$cache/scheduler-plugins/.build-XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
say "building scheduler-plugins $version into $dest"
start=$(date +%s)
(
  cd "$here"
  GOWORK=off GOFLAGS="-buildvcs=false -mod=readonly" CGO_ENABLED=0 nice -n 10 \
    go build -trimpath -ldflags "-s -w" -o "$tmp/$bin" sigs.k8s.io/scheduler-plugins/cmd/scheduler
) || die "go build of scheduler-plugins $version failed (see the compiler output above)"
say "built in $(($(date +%s) - start)) s"

"$tmp/$bin" --version >"$tmp/version.txt" 2>&1 || die "the scheduler-plugins $version just built does not run: $(cat "$tmp/version.txt")"
rm -rf "$dest"
chmod 755 "$tmp"
mv "$tmp" "$dest"
trap - EXIT
echo "$dest"
