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
# A cached version returns at once. Builds run under `nice -n 10` with a lock, so two callers at
# the same time build once. Cold: about 2 minutes on 2 idle cores (4 on busy ones).
set -euo pipefail

quiet=0
[ "${1:-}" = "--quiet" ] && quiet=1
say() { [ "$quiet" -eq 1 ] || echo "containerd2: $*" >&2; }
die() { echo "containerd2: $*" >&2; exit 1; }

command -v go >/dev/null || die "go is not on PATH; install Go 1.26 into /usr/local/go and add /usr/local/go/bin to PATH"
command -v flock >/dev/null || die "flock is missing; install the Debian package util-linux"

version="${CONTAINERD2_VERSION:-v2.4.2}"
[[ "$version" =~ ^v2\.[0-9]+\.[0-9]+$ ]] || die "CONTAINERD2_VERSION=$version: want v2.MINOR.PATCH"
cache="${FINEGRAIN_CACHE:-$HOME/.cache/finegrain}"
dest="$cache/containerd/$version"
bins=(containerd ctr containerd-shim-runc-v2)

complete() {
  local b
  for b in "${bins[@]}"; do [ -x "$dest/$b" ] || return 1; done
}

if complete; then
  say "using cached containerd $version in $dest"
  echo "$dest"
  exit 0
fi

mkdir -p "$cache/containerd"
exec 9>"$cache/containerd/.build.lock"
if ! flock -n 9; then
  say "another build holds $cache/containerd/.build.lock; waiting for it"
  flock 9
fi
if complete; then
  echo "$dest"
  exit 0
fi

tmp="$(mktemp -d "$cache/containerd/.build-XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
pkgs=()
for b in "${bins[@]}"; do pkgs+=("github.com/containerd/containerd/v2/cmd/$b@$version"); done
say "building containerd $version into $dest"
start=$(date +%s)
# Outside any module, so the tree's go.mod plays no part.
(cd "$tmp" && GOWORK=off GOBIN="$tmp" nice -n 10 go install "${pkgs[@]}") ||
  die "go install of containerd $version failed (see the compiler output above)"
say "built in $(( $(date +%s) - start )) s"
rm -rf "$dest"
chmod 755 "$tmp"
mv "$tmp" "$dest"
trap - EXIT
complete || die "build finished but $dest lacks one of ${bins[*]}"
"$dest/containerd" --version >&2
echo "$dest"
