#!/usr/bin/env bash
# Builds metrics-server (sigs.k8s.io/metrics-server/cmd/metrics-server) from the wrapper module
# next to this script, and caches the binary. make bench-dc-objective runs it on the host against
# the local cluster's kubelets, so that the HorizontalPodAutoscaler arm of the bench has the
# resource metrics API (bench/dcobjective/metrics-server.sh).
#
# Usage: hack/metrics-server/build.sh
# Prints the directory holding the metrics-server binary on stdout. Progress goes to stderr.
#
# The cache lives outside git, in $FINEGRAIN_CACHE (default ~/.cache/finegrain), under a key made
# of the metrics-server version and a hash of go.mod and go.sum: a second run with the same files
# returns at once; changing either builds afresh. Builds run under `nice -n 10` with a lock, so
# two callers at the same time build once.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

say() { echo "metrics-server-build: $*" >&2; }
die() { echo "metrics-server-build: $*" >&2; exit 1; }

command -v go >/dev/null || die "go is not on PATH; install Go 1.26 into /usr/local/go and add /usr/local/go/bin to PATH"
command -v flock >/dev/null || die "flock is missing; install the Debian package util-linux"

version="$(awk '$1 == "sigs.k8s.io/metrics-server" && $2 ~ /^v/ { print $2 }' "$here/go.mod")"
[[ "$version" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] ||
  die "$here/go.mod does not require sigs.k8s.io/metrics-server vMAJOR.MINOR.PATCH (found '${version}')"

key="$(cat "$here/go.mod" "$here/go.sum" | sha256sum | cut -c1-12)"
cache="${FINEGRAIN_CACHE:-$HOME/.cache/finegrain}"
dest="$cache/metrics-server/$version-$key"
bin=metrics-server

if [ -x "$dest/$bin" ]; then
  say "using cached metrics-server $version in $dest"
  echo "$dest"
  exit 0
fi

mkdir -p "$cache/metrics-server"
exec 9>"$cache/metrics-server/.build.lock"
if ! flock -n 9; then
  say "another build holds $cache/metrics-server/.build.lock; waiting for it"
  flock 9
fi
if [ -x "$dest/$bin" ]; then
  say "another build finished $dest while this one waited"
  echo "$dest"
  exit 0
fi

tmp="$(mktemp -d "$cache/metrics-server/.build-XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
say "building metrics-server $version into $dest"
start=$(date +%s)
(
  cd "$here"
  GOWORK=off GOFLAGS="-buildvcs=false -mod=readonly" CGO_ENABLED=0 nice -n 10 \
    go build -trimpath -ldflags "-s -w" -o "$tmp/$bin" sigs.k8s.io/metrics-server/cmd/metrics-server
) || die "go build of metrics-server $version failed (see the compiler output above)"
say "built in $(($(date +%s) - start)) s"

"$tmp/$bin" --version >"$tmp/version.txt" 2>&1 || die "the metrics-server $version just built does not run: $(cat "$tmp/version.txt")"
rm -rf "$dest"
chmod 755 "$tmp"
mv "$tmp" "$dest"
trap - EXIT
echo "$dest"
