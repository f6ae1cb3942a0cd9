#!/usr/bin/env bash
# Builds the local cluster's DNS server (CoreDNS, with the plugins main.go names) from the
# wrapper module next to this script, and caches the binary.
#
# Usage: hack/coredns/build.sh
# Prints the directory holding the coredns binary on stdout. Progress goes to stderr.
#
# The cache lives outside git, in $FINEGRAIN_CACHE (default ~/.cache/finegrain), under a key made
# of the CoreDNS version and a hash of go.mod, go.sum and main.go (main.go picks the plugins): a
# second run with the same files returns at once; changing any of them builds afresh. Builds run
# under `nice -n 10` with a lock, so two callers at the same time build once. Cold (empty module
# and build caches): 85 s on 2 cores, module downloads included; minutes on a loaded machine.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

say() { echo "coredns-build: $*" >&2; }
die() { echo "coredns-build: $*" >&2; exit 1; }

command -v go >/dev/null || die "go is not on PATH; install Go 1.26 into /usr/local/go and add /usr/local/go/bin to PATH"
command -v flock >/dev/null || die "flock is missing; install the Debian package util-linux"

version="$(awk '$1 == "require" && $2 == "github.com/coredns/coredns" { print $3 }
  $1 == "github.com/coredns/coredns" && $2 ~ /^v/ { print $2 }' "$here/go.mod")"
[[ "$version" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] ||
  die "$here/go.mod does not require github.com/coredns/coredns vMAJOR.MINOR.PATCH (found '${version}')"

key="$(cat "$here/go.mod" "$here/go.sum" "$here/main.go" | sha256sum | cut -c1-12)"
cache="${FINEGRAIN_CACHE:-$HOME/.cache/finegrain}"
dest="$cache/coredns/$version-$key"

if [ -x "$dest/coredns" ]; then
  say "using cached CoreDNS $version in $dest"
  echo "$dest"
  exit 0
fi

mkdir -p "$cache/coredns"
exec 9>"$cache/coredns/.build.lock"
if ! flock -n 9; then
  say "another build holds $cache/coredns/.build.lock; waiting for it"
  flock 9
fi
if [ -x "$dest/coredns" ]; then
  say "another build finished $dest while this one waited"
  echo "$dest"
  exit 0
fi

tmp="$(mktemp -d "$cache/coredns/.build-XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
say "building CoreDNS $version into $dest"
start=$(date +%s)
(
  cd "$here"
  GOWORK=off GOFLAGS="-buildvcs=false -mod=readonly" CGO_ENABLED=0 nice -n 10 \
    go build -trimpath -ldflags "-s -w" -o "$tmp/coredns" .
) || die "go build of CoreDNS $version failed (see the compiler output above)"
say "built in $(($(date +%s) - start)) s"

"$tmp/coredns" -plugins >"$tmp/plugins.txt" 2>&1 || die "the CoreDNS $version just built does not run: $(cat "$tmp/plugins.txt")"
rm -rf "$dest"
chmod 755 "$tmp"
mv "$tmp" "$dest"
trap - EXIT
echo "$dest"
