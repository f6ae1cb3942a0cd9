#!/usr/bin/env bash
# Builds localhost/finegrain-mpi:dev (images/mpi/README.md) as an OCI archive; hack/images/build.sh
# calls it. Usage: hack/images/mpi.sh OCIBUILD ARCHIVE
#   OCIBUILD  the hack/images/ocibuild binary build.sh has just built
#   ARCHIVE   where the image goes, _output/images/mpi.tar
#
# Three cached stages under ${FINEGRAIN_CACHE:-$HOME/.cache/finegrain}/images, each rebuilt only
# when its inputs change (its key is a hash of them):
#   mpi-rootfs-KEY.tar     Debian 12 from mmdebstrap: images/mpi/packages, Debian's Open MPI
#                          settings plus images/mpi/openmpi-mca-params.conf, no SSH host keys
#                          and no munge key (each virtual cluster has its own)
#   mpi-hpcc-mpich-KEY     HPCC 1.5.0 built against MPICH in a throw-away chroot
#                          (images/mpi/hpcc-mpich/)
#   mpi-image-KEY.tar      the image: the root file system plus a layer with mpi-entrypoint, the
#                          wrappers and configuration of images/mpi/ and the MPICH hpcc
# Every key includes this script and the Debian repositories apt uses here; the image's key also
# every file under images/mpi/, ocibuild's sources and the Go version. ARCHIVE is a hard link to
# (or a copy of) the cached image. Builds run under nice, one at a time (a lock in the cache), and
# write to temporary names first, so a failed build leaves no half archive behind.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
self="$root/hack/images/mpi.sh"
images="$root/images/mpi"
suite=bookworm
name=localhost/finegrain-mpi:dev

die() {
  echo "images: ERROR: $*" >&2
  exit 1
}
log() { echo "images: $*" >&2; }

[ $# -eq 2 ] || die "usage: hack/images/mpi.sh OCIBUILD ARCHIVE"
ocibuild="$1"
archive="$2"
cache="${FINEGRAIN_CACHE:-$HOME/.cache/finegrain}/images"
buildlog="$(dirname "$archive")/mpi-build.log"

# debian_sources: one-line apt sources for the Debian 12 repositories apt on this machine uses,
# read through apt itself (sources.list, sources.list.d/*.list and *.sources alike): URI, suite and
# the components of each.
debian_sources() {
  apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(COMPONENT)' 'Created-By: Packages' 'Origin: Debian' |
    sort -u | awk -v s="$suite" '$2 == s || $2 == s "-updates" || $2 == s "-security" { c[$1 " " $2] = c[$1 " " $2] " " $3 }
      END { for (k in c) print k c[k] }' | sort
}

# hash_inputs PATH...: one hash over the names and contents of the files (directories walked,
# sorted) so that renaming, adding or editing any of them changes it.
hash_inputs() {
  local p
  for p in "$@"; do
    if [ -d "$p" ]; then
      find "$p" -type f -print0 | sort -z | xargs -0 sha256sum
    else
      sha256sum "$p"
    fi
  done | sed "s|  $root/|  |" | sha256sum | cut -c1-16
}

# keep_newest GLOB: remove the cached entries matching GLOB but the two used last, so that
# switching between two branches does not rebuild while the cache stays bounded.
keep_newest() {
  local old
  old="$(cd "$cache" && ls -t -- $1 2>/dev/null | tail -n +3)" || true
  [ -z "$old" ] || (cd "$cache" && rm -f -- $old)
}

# comma_list FILE: the package names of a package list file, comma-separated.
comma_list() {
  sed 's/#.*//' "$1" | tr -s ' \t\n' '\n' | grep -v '^$' | paste -sd, -
}

sources="$(debian_sources)"
[ -n "$sources" ] || die "apt on this machine lists no Debian 12 ($suite) repository (apt-get indextargets found none with Origin Debian): add the Debian mirror to /etc/apt/sources.list.d and run apt-get update"
mapfile -t deb_lines < <(sed 's/^/deb /' <<<"$sources")
mapfile -t src_lines < <(sed 's/^/deb-src /' <<<"$sources")
# apt inside mmdebstrap reads only the chroot's configuration; a proxy apt here uses reaches it
# through the environment, which apt honours and which stays out of the image.
eval "$(apt-config shell http_proxy Acquire::http::Proxy https_proxy Acquire::https::Proxy)"
[ -z "${http_proxy:-}" ] || export http_proxy
[ -z "${https_proxy:-}" ] || export https_proxy

command -v go >/dev/null || die "go is not on PATH; install Go 1.26 into /usr/local/go and add /usr/local/go/bin to PATH"
key_rootfs="$( (echo "$sources"; hash_inputs "$images/packages" "$images/openmpi-mca-params.conf" "$self") | sha256sum | cut -c1-16)"
key_hpcc="$( (echo "$sources"; hash_inputs "$images/hpcc-mpich" "$self") | sha256sum | cut -c1-16)"
key_image="$( (echo "$key_rootfs $key_hpcc $(go env GOVERSION)"
  hash_inputs "$images" "$self" "$root/hack/images/ocibuild" "$root/hack/images/ocilayout") | sha256sum | cut -c1-16)"
rootfs="$cache/mpi-rootfs-$key_rootfs.tar"
hpcc="$cache/mpi-hpcc-mpich-$key_hpcc"
image="$cache/mpi-image-$key_image.tar"

# publish: ARCHIVE becomes the cached image (a hard link, or a copy across file systems),
# replaced in one rename.
publish() {
  touch "$image"
  [ "$archive" -ef "$image" ] && return 0
  rm -f "$archive.tmp"
  ln "$image" "$archive.tmp" 2>/dev/null || cp "$image" "$archive.tmp"
  mv -f "$archive.tmp" "$archive"
}

if [ -f "$image" ]; then
  publish
  log "$name is up to date (cached $image)"
  exit 0
fi

mkdir -p "$cache"
exec 9>"$cache/mpi.lock"
if ! flock -n 9; then
  log "waiting for another build of $name (lock $cache/mpi.lock)"
  flock 9
fi
if [ -f "$image" ]; then
  publish
  log "$name was built meanwhile (cached $image)"
  exit 0
fi

[ "$(id -u)" -eq 0 ] || die "building $name runs mmdebstrap, which needs root here: run make images as root (later builds reuse the cache in $cache)"
command -v mmdebstrap >/dev/null || die "mmdebstrap is missing: install the Debian package mmdebstrap (. hack/deps.sh && install_deps images)"

work="$(mktemp -d "$cache/.build-XXXXXX")"
trap 'rm -rf "$work"' EXIT
: >"$buildlog"

# run_logged WHAT CMD...: run CMD under nice with its output in the build log; on failure show
# the log's tail.
run_logged() {
  local what="$1" start=$SECONDS
  shift
  log "building $what (log: $buildlog)"
  if ! nice -n 10 "$@" >>"$buildlog" 2>&1; then
    tail -n 30 "$buildlog" >&2
    die "building $what failed; the whole log is $buildlog"
  fi
  log "built $what in $((SECONDS - start)) s"
}

# 1. The root file system. Man pages, translations and documentation stay out (copyright files and
#    hpcc's examples stay; the exclusions stay in the image's dpkg configuration for images built
#    on it). openssh-server's postinst made host keys: removed, the entrypoint makes new ones per
#    container; munge's made a key: removed, a virtual cluster's pods get theirs from its Secret.
#    resolv.conf and hostname came from this machine: emptied, the runtime mounts its own.
if [ ! -f "$rootfs" ]; then
  run_logged "the MPI root file system ($suite: $(comma_list "$images/packages"))" \
    mmdebstrap --variant=apt --format=tar --include="$(comma_list "$images/packages")" \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-include=/usr/share/locale/locale.alias' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-include=/usr/share/doc/hpcc/*' \
    --customize-hook='rm -f "$1"/etc/ssh/ssh_host_* "$1"/etc/munge/munge.key' \
    --customize-hook="cat '$images/openmpi-mca-params.conf' >>\"\$1/etc/openmpi/openmpi-mca-params.conf\"" \
    --customize-hook=': >"$1/etc/resolv.conf"; : >"$1/etc/hostname"; chmod 0644 "$1/etc/resolv.conf" "$1/etc/hostname"' \
    "$suite" "$work/rootfs.tar" "${deb_lines[@]}"
  mv "$work/rootfs.tar" "$rootfs"
fi
touch "$rootfs"
keep_newest 'mpi-rootfs-*.tar'

# 2. HPCC for MPICH, built in a chroot that is thrown away (format null): only the binary leaves.
#    deb-src entries let hpcc-mpich/build.sh find the source package in the signed Sources index.
if [ ! -f "$hpcc" ]; then
  run_logged "HPCC 1.5.0 against MPICH" \
    mmdebstrap --variant=apt --format=null --include="$(comma_list "$images/hpcc-mpich/packages")" \
    --customize-hook='mkdir "$1/build"' \
    --customize-hook="upload $images/hpcc-mpich/build.sh /build/build.sh" \
    --customize-hook="upload $images/hpcc-mpich/Make.finegrain /build/Make.finegrain" \
    --customize-hook='chroot "$1" sh /build/build.sh' \
    --customize-hook="download /build/out/hpcc $work/hpcc" \
    "$suite" /dev/null "${deb_lines[@]}" "${src_lines[@]}"
  chmod 0755 "$work/hpcc"
  mv "$work/hpcc" "$hpcc"
fi
touch "$hpcc"
keep_newest 'mpi-hpcc-mpich-*'

# 3. The image: the root file system and a layer with what images/mpi/ adds.
log "building $name"
CGO_ENABLED=0 nice -n 10 go build -C "$root" -trimpath -ldflags '-s -w' -o "$work/mpi-entrypoint" ./images/mpi/entrypoint ||
  die "go build of ./images/mpi/entrypoint failed"
"$ocibuild" -name "$name" -o "$work/image.tar" -layer "$rootfs" \
  -entrypoint /usr/local/bin/mpi-entrypoint -workdir /root \
  -env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin -env HOME=/root \
  -env OMPI_ALLOW_RUN_AS_ROOT=1 -env OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  "/usr/local/bin/mpi-entrypoint=$work/mpi-entrypoint" \
  "/usr/local/bin/mpirun=$images/bin/mpirun" \
  "/usr/local/bin/mpiexec=$images/bin/mpirun" \
  "/usr/local/bin/hpcc=$images/bin/hpcc" \
  "/usr/lib/finegrain-mpi/mpich/bin/hpcc=$hpcc" \
  "/usr/etc/mpiexec.hydra.conf=$images/mpiexec.hydra.conf" \
  "/etc/ssh/sshrc=$images/sshrc" ||
  die "ocibuild could not write $name"
mv "$work/image.tar" "$image"
publish
keep_newest 'mpi-image-*.tar'
log "built $name: $(du -m "$image" | cut -f1) MB, cached as $image"
