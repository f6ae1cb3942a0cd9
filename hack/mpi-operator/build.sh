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
# The cache lives outside git, in $FINEGRAIN_CACHE (default ~/.cache/finegrain), under a key made
# of the MPI Operator version and a hash of go.mod and go.sum: a second run with the same files
# returns at once; changing either builds afresh. Builds run under `nice -n 10` with a lock, so two
# callers at the same time build once.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
module=github.com/kubeflow/mpi-operator

say() { echo "mpi-operator-build: $*" >&2; }
die() { echo "mpi-operator-build: $*" >&2; exit 1; }

command -v go >/dev/null || die "go is not on PATH; install Go 1.26 into /usr/local/go and add /usr/local/go/bin to PATH"
command -v flock >/dev/null || die "flock is missing; install the Debian package util-linux"

version="$(awk -v m="$module" '$1 == "require" && $2 == m { print $3 } $1 == m && $2 ~ /^v/ { print $2 }' "$here/go.mod")"
[[ "$version" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] ||
  die "$here/go.mod does not require $module vMAJOR.MINOR.PATCH (found '${version}')"

key="$(cat "$here/go.mod" "$here/go.sum" | sha256sum | cut -c1-12)"
cache="${FINEGRAIN_CACHE:-$HOME/.cache/finegrain}"
dest="$cache/mpi-operator/$version-$key"
bin=mpi-operator
crd=mpijobs-crd.yaml

if [ -x "$dest/$bin" ] && [ -f "$dest/$crd" ]; then
  say "using cached MPI Operator $version in $dest"
  echo "$dest"
  exit 0
fi

mkdir -p "$cache/mpi-operator"
exec 9>"$cache/mpi-operator/.build.lock"
if ! flock -n 9; then
  say "another build holds $cache/mpi-operator/.build.lock; waiting for it"
  flock 9
fi
if [ -x "$dest/$bin" ] && [ -f "$dest/$crd" ]; then
  say "another build finished $dest while this one waited"
  echo "$dest"
  exit 0
fi

tmp="$(mktemp -d "$cache/mpi-operator/.build-XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
say "building MPI Operator $version into $dest"
start=$(date +%s)
(
  cd "$here"
  GOWORK=off GOFLAGS="-buildvcs=false -mod=readonly" CGO_ENABLED=0 nice -n 10 \
    go build -trimpath -ldflags "-s -w" -o "$tmp/$bin" "$module/cmd/mpi-operator"
) || die "go build of MPI Operator $version failed (see the compiler output above)"
say "built in $(($(date +%s) - start)) s"

src="$(cd "$here" && GOWORK=off GOFLAGS=-mod=readonly go list -m -f '{{.Dir}}' "$module")" ||
  die "cannot find the source of $module $version in the module cache"
cp "$src/manifests/base/kubeflow.org_mpijobs.yaml" "$tmp/$crd" ||
  die "$module $version has no manifests/base/kubeflow.org_mpijobs.yaml to install the MPIJob CRD from"
chmod 644 "$tmp/$crd"

"$tmp/$bin" --version >"$tmp/version.txt" 2>&1 || die "the MPI Operator $version just built does not run: $(cat "$tmp/version.txt")"
rm -rf "$dest"
chmod 755 "$tmp"
mv "$tmp" "$dest"
trap - EXIT
echo "$dest"
