# shellcheck shell=bash
# Sourced by the scripts that build a program once and cache it outside git (hack/k8s,
# hack/coredns, hack/scheduler-plugins, hack/mpi-operator, hack/metrics-server, hack/kwok build.sh and
# hack/cluster/containerd2.sh). The script sets BUILD_NAME (the prefix of its messages) before it
# sources this file.
#
# The cache lives in $FINEGRAIN_CACHE (default ~/.cache/finegrain). A build runs under `nice -n 10`
# in a temporary directory beside its destination and is moved into place only once complete, with
# a lock per cache directory, so two callers at the same time build once and an interrupted build
# leaves nothing behind that looks finished.

say() { [ "${BUILD_QUIET:-0}" -eq 1 ] || echo "$BUILD_NAME: $*" >&2; }
die() { echo "$BUILD_NAME: $*" >&2; exit 1; }

command -v go >/dev/null || die "go is not on PATH; install Go 1.26 into /usr/local/go and add /usr/local/go/bin to PATH"
command -v flock >/dev/null || die "flock is missing; install the Debian package util-linux"

BUILD_CACHE="${FINEGRAIN_CACHE:-$HOME/.cache/finegrain}"

# module_version GOMOD MODULE: the vMAJOR.MINOR.PATCH at which GOMOD requires MODULE (a require
# line or a line of a require block); dies naming the file otherwise.
module_version() {
  local gomod=$1 module=$2 v
  v="$(awk -v m="$module" '$1 == "require" && $2 == m { print $3 } $1 == m && $2 ~ /^v/ { print $2 }' "$gomod")"
  [[ "$v" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "$gomod does not require $module vMAJOR.MINOR.PATCH (found '${v}')"
  echo "$v"
}

# content_key FILE...: 12 hex digits of the files' SHA-256, the part of a cache key that changes
# with the build's inputs.
content_key() { cat "$@" | sha256sum | cut -c1-12; }

# go_build_module DIR OUT PKG... [-- LDFLAGS]: go build of PKG... in the wrapper module DIR, with
# its go.sum checked and nothing taken from a workspace, statically, into OUT (a file, or a
# directory ending in /).
go_build_module() {
  local dir=$1 out=$2 ldflags="-s -w"
  shift 2
  local pkgs=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do pkgs+=("$1"); shift; done
  [ "${1:-}" = "--" ] && ldflags+=" $2"
  (
    cd "$dir"
    GOWORK=off GOFLAGS="-buildvcs=false -mod=readonly" CGO_ENABLED=0 nice -n 10 \
      go build -trimpath -ldflags "$ldflags" -o "$out" "${pkgs[@]}"
  )
}

# check_runs BIN ARG...: runs a binary just built (e.g. with --version), its output kept beside it
# in BIN.out; fails naming it and quoting the output when it does not run.
check_runs() {
  local bin=$1
  "$@" >"$bin.out" 2>&1 || { echo "$bin just built does not run: $(cat "$bin.out")" >&2; return 1; }
}

# cached_build WHAT DEST COMPLETE BUILD: prints DEST once it holds a complete build of WHAT.
# COMPLETE DIR succeeds when DIR holds one; BUILD DIR builds into the empty directory DIR and
# fails with the reason on stderr. A DEST already complete returns at once.
cached_build() {
  local what=$1 dest=$2 complete=$3 build=$4 root start
  root="$(dirname "$dest")"
  if "$complete" "$dest"; then
    say "using cached $what in $dest"
    echo "$dest"
    return 0
  fi
  mkdir -p "$root"
  exec 9>"$root/.build.lock"
  if ! flock -n 9; then
    say "another build holds $root/.build.lock; waiting for it"
    flock 9
  fi
  if "$complete" "$dest"; then
    say "another build finished $dest while this one waited"
    echo "$dest"
    return 0
  fi
  BUILD_TMP="$(mktemp -d "$root/.build-XXXXXX")"
  trap 'rm -rf "$BUILD_TMP"' EXIT
  say "building $what into $dest${BUILD_HINT:+ ($BUILD_HINT)}"
  start=$(date +%s)
  "$build" "$BUILD_TMP" || die "building $what failed (see the output above)"
  say "built in $(($(date +%s) - start)) s"
  rm -rf "$dest"
  chmod 755 "$BUILD_TMP"
  mv "$BUILD_TMP" "$dest"
  trap - EXIT
  exec 9>&-
  "$complete" "$dest" || die "the build of $what finished but $dest is incomplete"
  echo "$dest"
}
