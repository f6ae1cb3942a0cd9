# Shared settings and helpers of the local cluster scripts (up.sh, down.sh, e2e.sh, the demos).
# Sourced, not run. The cluster is a machine-wide singleton: state under $CLUSTER_DIR and
# $RUN_DIR, one lock serialising the scripts. With NODES=1 (the default) it has one node named
# after the host and every listener on loopback (127.0.0.1; the cluster DNS on its own
# $CLUSTER_DNS). With NODES=2..9 the control plane stays on the host and each node is a kubelet
# and a containerd in namespaces of their own (nodes.sh; hack/cluster/README.md).

FG_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CLUSTER_DIR="${FINEGRAIN_CLUSTER_DIR:-/var/lib/finegrain-cluster}"
RUN_DIR="${FINEGRAIN_CLUSTER_RUN_DIR:-/run/finegrain-cluster}"
LOG_DIR="$CLUSTER_DIR/logs"
PKI="$CLUSTER_DIR/pki"
PID_DIR="$RUN_DIR/pids"
KUBELET_ROOT="$CLUSTER_DIR/kubelet"
CONTAINERD_SOCK="$RUN_DIR/containerd/containerd.sock"
ADMIN_KUBECONFIG="$CLUSTER_DIR/admin.kubeconfig"
CLUSTER_ENV="$CLUSTER_DIR/cluster.env"
LOCK_FILE="${CLUSTER_DIR%/}.lock"
API_PORT=6443
# Only the API server allocates service IPs: no kube-proxy runs and every pod uses the host's
# network, so a ClusterIP is never dialled. The range is TEST-NET-2 (RFC 5737), reserved for
# documentation and never assigned to a real network, unlike the RFC 1918 private ranges, which
# could shadow a network this machine or its neighbours use.
SERVICE_CIDR=198.51.100.0/24
PAUSE_IMAGE=localhost/finegrain-pause:dev
# The cluster DNS (CoreDNS, hack/coredns) listens on port 53 of a loopback address of its own,
# which hostNetwork pods share with the host: not 127.0.0.1, where a resolver of the machine
# (dnsmasq, a caching stub) may already hold port 53, nor 127.0.0.53/54 (systemd-resolved),
# 127.0.1.1 (Debian's address for the host name) or 127.0.53.53 (ICANN's name-collision
# warning). Every 127.0.0.0/8 address is local on Linux without configuring it. Its health and
# readiness endpoints are on the same address, on ports no other cluster component uses.
CLUSTER_DNS=127.10.0.53
CLUSTER_DOMAIN=cluster.local
CLUSTER_DNS_HEALTH_PORT=10053
CLUSTER_DNS_READY_PORT=10054
# Paths the kubelet, containerd and the CNI plugins write outside the cluster's directories (on
# several nodes, each node's mount namespace has a directory of its own mounted on each).
OUTSIDE_PATHS=(/var/lib/kubelet /var/log/containers /run/containerd /var/lib/cni)
# Daemons in start order; down.sh stops the node and the API server's clients first (the
# kubelet, kube-controller-manager, kube-scheduler, coredns), then containerd, kube-apiserver
# and etcd. On several nodes each node runs its own containerd-<node> and kubelet-<node>
# (cluster_daemons).
CONTROL_DAEMONS=(etcd kube-apiserver coredns kube-controller-manager kube-scheduler)
DAEMONS=("${CONTROL_DAEMONS[@]}" containerd kubelet)

log() { echo "cluster: $*" >&2; }
die() {
  echo "cluster: ERROR: $*" >&2
  exit 1
}

need_root() {
  [ "$(id -u)" -eq 0 ] || die "the local cluster needs root (cgroups, mounts, containerd); run it as root"
}

# need_cmd CMD PACKAGE: fail naming the Debian package that provides CMD.
need_cmd() {
  command -v "$1" >/dev/null || die "$1 is missing: install the Debian package $2 (hack/deps.sh group cluster: . hack/deps.sh && install_deps cluster)"
}

# kwok_bin: print the path of kwok $KWOK_VERSION (fake nodes' kubelets: make bench-placer-scale,
# make e2e's chaos test), installed into the finegrain build cache on first use (hack/kwok/build.sh).
KWOK_VERSION=v0.7.0
kwok_bin() {
  KWOK_VERSION="$KWOK_VERSION" "$FG_ROOT/hack/kwok/build.sh"
}

# take_lock: serialise the cluster scripts machine-wide. e2e.sh and the demos hold the lock across
# the scripts they call and export FINEGRAIN_CLUSTER_LOCKED=1 so those do not wait for it.
take_lock() {
  [ "${FINEGRAIN_CLUSTER_LOCKED:-0}" = 1 ] && return 0
  mkdir -p "$(dirname "$LOCK_FILE")"
  exec 8>"$LOCK_FILE"
  if ! flock -n 8; then
    log "another cluster script holds $LOCK_FILE; waiting for it"
    flock 8
  fi
  export FINEGRAIN_CLUSTER_LOCKED=1
}

# proc_start_time PID: the process's start time in clock ticks (field 22 of /proc/PID/stat),
# which tells a live daemon from an unrelated process that reused its PID. A zombie (killed, not
# yet reaped by PID 1) counts as gone.
proc_start_time() {
  local stat
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
  stat="${stat##*) }"
  # After the command name, field 3 (state) is the first: start time is field 22.
  set -- $stat
  [ "$1" != Z ] || return 1
  echo "${20}"
}

# daemon_pid NAME: print the PID of a daemon this cluster started, if it still runs.
daemon_pid() {
  local file="$PID_DIR/$1.pid" pid start
  [ -r "$file" ] || return 1
  read -r pid start <"$file" || return 1
  [ -n "$pid" ] && [ "$(proc_start_time "$pid")" = "$start" ] || return 1
  echo "$pid"
}

# start_daemon NAME CMD...: start CMD in its own session (Ctrl-C of the caller does not reach
# it) with output appended to $LOG_DIR/NAME.log, and record its PID and start time. The lock's
# descriptor is closed for it, or the daemon would hold the lock for its whole life.
start_daemon() {
  local name="$1" pid
  shift
  mkdir -p "$PID_DIR" "$LOG_DIR"
  echo "=== $(date -u +%FT%TZ) starting: $*" >>"$LOG_DIR/$name.log"
  setsid "$@" >>"$LOG_DIR/$name.log" 2>&1 </dev/null 8>&- &
  pid=$!
  echo "$pid $(proc_start_time "$pid")" >"$PID_DIR/$name.pid"
}

# wait_gone NAME PID START GRACE: wait until process PID (started at START) has exited; SIGKILL
# it after GRACE seconds.
wait_gone() {
  local name="$1" pid="$2" start="$3" grace="$4" i
  for ((i = 0; i < grace * 10; i++)); do
    [ "$(proc_start_time "$pid")" = "$start" ] || return 0
    sleep 0.1
  done
  log "$name (pid $pid) ignored SIGTERM for ${grace} s; killing it"
  kill -KILL "$pid" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do
    [ "$(proc_start_time "$pid")" = "$start" ] || return 0
    sleep 0.1
  done
  die "$name (pid $pid) survived SIGKILL"
}

# stop_pid NAME PID GRACE: SIGTERM, then SIGKILL after the grace period.
stop_pid() {
  local start
  start="$(proc_start_time "$2")" || return 0
  kill -TERM "$2" 2>/dev/null || return 0
  wait_gone "$1" "$2" "$start" "$3"
}

# stop_daemons GRACE NAME...: SIGTERM to each named daemon this cluster started, all at once,
# then wait for each (SIGKILL after GRACE seconds) and forget its PID file.
stop_daemons() {
  local grace="$1" name pid i
  shift
  local names=() pids=() starts=()
  for name in "$@"; do
    if pid="$(daemon_pid "$name")"; then
      names+=("$name")
      pids+=("$pid")
      starts+=("$(proc_start_time "$pid")")
      kill -TERM "$pid" 2>/dev/null || true
    fi
  done
  for i in "${!pids[@]}"; do
    wait_gone "${names[$i]}" "${pids[$i]}" "${starts[$i]}" "$grace"
  done
  for name in "$@"; do rm -f "$PID_DIR/$name.pid"; done
}

# wait_for WHAT SECONDS DAEMON CMD...: poll CMD every 0.2 s until it succeeds; fail with the tail
# of DAEMON's log when the deadline passes or DAEMON exits.
wait_for() {
  local what="$1" secs="$2" daemon="$3" deadline
  shift 3
  deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if ! daemon_pid "$daemon" >/dev/null; then
      tail -n 30 "$LOG_DIR/$daemon.log" >&2 || true
      die "$daemon exited while waiting for $what; its log is $LOG_DIR/$daemon.log (tail above)"
    fi
    if ((SECONDS >= deadline)); then
      tail -n 30 "$LOG_DIR/$daemon.log" >&2 || true
      die "$what not reached within ${secs} s; $daemon's log is $LOG_DIR/$daemon.log (tail above)"
    fi
    sleep 0.2
  done
}

# kube_bin: build (or reuse the cached) Kubernetes binaries and print their directory; the
# build's progress goes to stderr (a cold build takes minutes).
kube_bin() {
  "$FG_ROOT/hack/k8s/build.sh"
}

# coredns_bin: the same for the cluster DNS server (a cold build takes a minute or two).
coredns_bin() {
  "$FG_ROOT/hack/coredns/build.sh"
}

# dns_ready: CoreDNS answers on its readiness endpoint (200 once its kubernetes plugin has
# listed Services, EndpointSlices and Namespaces); a stopped process fails it in 2 s instead of
# hanging the caller.
dns_ready() {
  curl -sf --noproxy '*' --max-time 2 "http://$CLUSTER_DNS:$CLUSTER_DNS_READY_PORT/ready"
}

# cluster_up: true when every daemon of a started cluster still runs.
cluster_up() {
  local d
  [ -r "$CLUSTER_ENV" ] || return 1
  for d in $(cluster_daemons); do daemon_pid "$d" >/dev/null || return 1; done
}

# cluster_daemons: the daemons of the cluster cluster.env describes (of a single-node one when
# there is none), in start order.
cluster_daemons() {
  local names n
  names="$(cluster_setting NODE_NAMES)"
  if [ "$(cluster_setting NODES)" -gt 1 ] 2>/dev/null; then
    echo "${CONTROL_DAEMONS[@]}"
    for n in $names; do echo "containerd-$n kubelet-$n"; done
  else
    echo "${DAEMONS[@]}"
  fi
}

# cluster_sockets: the containerd socket of every node of the running cluster, as the host
# reaches it.
cluster_sockets() {
  local n
  if [ "$(cluster_setting NODES)" -gt 1 ] 2>/dev/null; then
    for n in $(cluster_setting NODE_NAMES); do echo "$(node_run_dir "$n")/containerd/containerd.sock"; done
  else
    echo "$CONTAINERD_SOCK"
  fi
}

# cluster_setting KEY: a value cluster.env recorded when the cluster came up; empty when no
# cluster is up (down.sh then only checks that nothing is left).
cluster_setting() {
  [ -f "$CLUSTER_ENV" ] || return 0
  sed -n "s/^$1=//p" "$CLUSTER_ENV"
}

ctr_k8s() {
  ctr --address "$CONTAINERD_SOCK" --namespace k8s.io "$@"
}

# import_images_all: import_images into the containerd of every node of the running cluster, at
# the same time (each node's containerd unpacks its own copy).
import_images_all() {
  local sock pids=() pid rc=0
  for sock in $(cluster_sockets); do
    (CONTAINERD_SOCK="$sock" import_images) &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
  return $rc
}

# import_images: import every image archive hack/images/build.sh wrote into the containerd at
# $CONTAINERD_SOCK, except one whose image containerd already holds complete and unpacked under
# the same name and manifest digest (re-importing the 300 MB MPI image costs seconds every time).
import_images() {
  local tar ref
  for tar in "$FG_ROOT"/_output/images/*.tar; do
    [ -e "$tar" ] || die "no image archives in $FG_ROOT/_output/images; run make images"
    ref="$(archive_image "$tar")"
    if [ -n "$ref" ] && image_present $ref; then
      continue
    fi
    ctr_k8s images import "$tar" >/dev/null ||
      die "ctr could not import $tar into the cluster's containerd ($CONTAINERD_SOCK)"
  done
}

# archive_image TAR: print "NAME DIGEST", the image name and manifest digest in the index.json of
# an archive written by hack/images/ocibuild (it comes second, so tar stops reading early);
# nothing when the index is not of that shape.
archive_image() {
  tar -xOf "$1" --occurrence=1 index.json 2>/dev/null |
    sed -n 's/.*"digest":"\(sha256:[0-9a-f]\{64\}\)".*"io.containerd.image.name":"\([^"]*\)".*/\2 \1/p' || true
}

# image_present NAME DIGEST: containerd has image NAME at manifest DIGEST with all its content
# and unpacked into its snapshotter.
image_present() {
  ctr_k8s images check "name==$1" 2>/dev/null |
    awk -v d="$2" 'NR > 1 && $3 == d && $4 == "complete" && $NF == "true" { found = 1 } END { exit !found }'
}

. "$FG_ROOT/hack/cluster/nodes.sh"
