#!/usr/bin/env bash
# Builds the local cluster's container images as OCI archives in _output/images/ from static Go
# binaries, with hack/images/ocibuild (no registry, no Docker engine):
#   localhost/finegrain-pause:dev   the pods' sandbox process (hack/images/pause)
#   localhost/finegrain:dev         every command under cmd/ in /usr/local/bin (when cmd/ has any),
#                                   stamped with hack/version.sh's version
#   localhost/finegrain-worker:dev  what test and benchmark pods run: pause (the default
#                                   entrypoint, an idle workload), podlister (the e2e suite's
#                                   in-cluster API client), gauge (the e2e suite's service with a
#                                   Prometheus gauge it sets), fgworker (bench/worker: DGEMM/STREAM)
#                                   and cpuservice (bench/cpuservice: a CPU-bound HTTP service with
#                                   a latency histogram and p99 gauge, issue 20's service objectives)
#   localhost/finegrain-mpi:dev     MPI workers and launchers: Debian 12 with Open MPI, MPICH, HPCC
#                                   and OpenSSH (hack/images/mpi.sh, cached; images/mpi/README.md)
# With --import, also imports them into the running local cluster (make images does).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="$root/_output/images"
bin="$out/bin"
cmdbin="$out/cmd"

die() {
  echo "images: ERROR: $*" >&2
  exit 1
}
command -v go >/dev/null || die "go is not on PATH; install Go 1.26 into /usr/local/go and add /usr/local/go/bin to PATH"

cd "$root"
rm -rf "$bin" "$cmdbin"
mkdir -p "$bin" "$cmdbin"
# The commands report the version hack/version.sh gives, as make build stamps it.
stamp="$("$root/hack/version.sh" --ldflags)"
gobuild() {
  CGO_ENABLED=0 nice -n 10 go build -trimpath -ldflags "-s -w $stamp" "$@"
}
tools=(./hack/images/pause ./hack/images/ocibuild ./test/e2e/podlister ./test/e2e/gauge)
gobuild -o "$bin/" "${tools[@]}" || die "go build of ${tools[*]} failed"
if [ -d bench/worker ]; then
  gobuild -o "$bin/fgworker" ./bench/worker || die "go build of ./bench/worker failed"
fi
if [ -d bench/cpuservice ]; then
  gobuild -o "$bin/cpuservice" ./bench/cpuservice || die "go build of ./bench/cpuservice failed"
fi
# Each command on its own: one that does not build yet (work in progress in a shared tree) is
# left out of the image with a warning instead of blocking the cluster. CI cannot get this far
# with a broken command: make test vets every package first.
for pkg in $(go list -e ./cmd/... 2>/dev/null); do
  gobuild -o "$cmdbin/" "$pkg" || echo "images: WARNING: $pkg does not build; localhost/finegrain:dev leaves it out" >&2
done
cmds="$(ls "$cmdbin")"

ocibuild() { "$bin/ocibuild" "$@" || die "could not write image archive ${*: -1}"; }
path_env="PATH=/usr/local/bin:/usr/bin:/bin"

ocibuild -name localhost/finegrain-pause:dev -o "$out/pause.tar" -entrypoint /pause "/pause=$bin/pause"

worker_files=("/usr/local/bin/pause=$bin/pause" "/usr/local/bin/podlister=$bin/podlister" "/usr/local/bin/gauge=$bin/gauge")
[ ! -x "$bin/fgworker" ] || worker_files+=("/usr/local/bin/fgworker=$bin/fgworker")
[ ! -x "$bin/cpuservice" ] || worker_files+=("/usr/local/bin/cpuservice=$bin/cpuservice")
ocibuild -name localhost/finegrain-worker:dev -o "$out/worker.tar" -entrypoint /usr/local/bin/pause \
  -env "$path_env" -dir /tmp "${worker_files[@]}"

rm -f "$out/finegrain.tar"
if [ -n "$cmds" ]; then
  files=()
  for f in "$cmdbin"/*; do files+=("/usr/local/bin/$(basename "$f")=$f"); done
  ocibuild -name localhost/finegrain:dev -o "$out/finegrain.tar" -env "$path_env" -dir /tmp "${files[@]}"
fi
"$root/hack/images/mpi.sh" "$bin/ocibuild" "$out/mpi.tar" ||
  die "could not build localhost/finegrain-mpi:dev (hack/images/mpi.sh; its log is $out/mpi-build.log)"
echo "images: built $(cd "$out" && echo *.tar) in $out" >&2

if [ "${1:-}" = "--import" ]; then
  . "$root/hack/cluster/lib.sh"
  if cluster_up; then
    import_images_all || die "could not import the images into the local cluster (see above)"
    echo "images: imported into the local cluster" >&2
  else
    echo "images: the local cluster is not up; make cluster-up imports them" >&2
  fi
fi
