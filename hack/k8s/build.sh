#!/usr/bin/env bash
# Builds the Kubernetes components of the local cluster (kube-apiserver, kube-controller-manager,
# kube-scheduler, kubelet, kubectl) from the wrapper module next to this script, and caches them.
#
# Usage: hack/k8s/build.sh
# Prints the directory holding the binaries on stdout. Progress goes to stderr.
#
# The cache lives outside git, in $FINEGRAIN_CACHE (default ~/.cache/finegrain), under a key made
# of the Kubernetes version and a hash of go.mod + go.sum: a second run with the same module
# files returns at once; editing a replace line builds afresh. Builds run under `nice -n 10`
# with a lock, so two callers at the same time build once.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

say() { echo "k8s-build: $*" >&2; }
die() { echo "k8s-build: $*" >&2; exit 1; }

command -v go >/dev/null || die "go is not on PATH; install Go 1.26 into /usr/local/go and add /usr/local/go/bin to PATH"
command -v flock >/dev/null || die "flock is missing; install the Debian package util-linux"

version="$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" { print $3 }
  $1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2 }' "$here/go.mod")"
[ -n "$version" ] || die "$here/go.mod does not require k8s.io/kubernetes vX.Y.Z"
[[ "$version" =~ ^v([0-9]+)\.([0-9]+)\.[0-9]+$ ]] || die "k8s.io/kubernetes version $version in $here/go.mod is not vMAJOR.MINOR.PATCH"
major="${BASH_REMATCH[1]}"
minor="${BASH_REMATCH[2]}"

key="$(cat "$here/go.mod" "$here/go.sum" | sha256sum | cut -c1-12)"
cache="${FINEGRAIN_CACHE:-$HOME/.cache/finegrain}"
dest="$cache/kubernetes/$version-$key"
components=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)

complete() {
  local c
  for c in "${components[@]}"; do [ -x "$dest/$c" ] || return 1; done
}

if complete; then
  say "using cached $version binaries in $dest"
  echo "$dest"
  exit 0
fi

mkdir -p "$cache/kubernetes"
exec 9>"$cache/kubernetes/.build.lock"
if ! flock -n 9; then
  say "another build holds $cache/kubernetes/.build.lock; waiting for it"
  flock 9
fi
if complete; then
  say "another build finished $dest while this one waited"
  echo "$dest"
  exit 0
fi

# Unstamped, the servers report v0.0.0-master+$Format:%H$ and kubectl refuses to parse it.
stamp=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  stamp+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
  stamp+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
done

tmp="$(mktemp -d "$cache/kubernetes/.build-XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
pkgs=()
for c in "${components[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done

say "building ${components[*]} $version into $dest (cold: about 6 minutes on 2 idle cores)"
start=$(date +%s)
(
  cd "$here"
  GOWORK=off GOFLAGS="-buildvcs=false -mod=readonly" CGO_ENABLED=0 nice -n 10 \
    go build -trimpath -ldflags "-s -w$stamp" -o "$tmp/" "${pkgs[@]}"
) || die "go build of ${components[*]} $version failed (see the compiler output above)"
say "built in $(( $(date +%s) - start )) s"

rm -rf "$dest"
chmod 755 "$tmp"
mv "$tmp" "$dest"
trap - EXIT
complete || die "build finished but $dest lacks one of ${components[*]}"
echo "$dest"
