#!/usr/bin/env bash
# Tears the local cluster down and removes everything it left on the machine: the processes it
# started (never by name: daemons by their PID files, containerd shims by the socket they serve,
# the containers by the kubepods cgroups), every mount under its directories (the kubelet's root
# bind mount, volumes, container root filesystems), the kubepods cgroups in every hierarchy, the
# paths the kubelet and containerd create outside their directories, and its state; with several
# nodes also every node's daemons, containers and cgroup subtree, mount namespace, network
# namespace and the bridge (hack/cluster/nodes.sh). The daemons' logs stay in $CLUSTER_DIR/logs
# for a post-mortem.
# Idempotent: on a machine without a cluster it only checks that nothing is left, and it removes
# what a cluster that stopped uncleanly left.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

need_root
take_lock
# A CONTAINERD=2 cluster is talked to with its own ctr.
containerd_bin="$(cluster_setting CONTAINERD_BIN)"
[ -z "$containerd_bin" ] || PATH="$containerd_bin:$PATH"

# cgroup_dirs: the kubepods cgroup of every hierarchy (v1 controllers, named and unified ones),
# and the nodes' subtrees of a cluster of several nodes.
cgroup_dirs() {
  local d
  for d in /sys/fs/cgroup/kubepods /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/"$NODES_CGROUP" /sys/fs/cgroup/*/"$NODES_CGROUP"; do
    [ -d "$d" ] && echo "$d"
  done
  return 0
}

# recorded DAEMON: the daemons of that kind with a PID file (containerd, or containerd-node-1 and
# so on with several nodes).
recorded() {
  local f
  for f in "$PID_DIR/$1".pid "$PID_DIR/$1"-*.pid; do
    [ -e "$f" ] && basename "$f" .pid
  done
  return 0
}

# kill_containers: SIGKILL every process in the kubepods cgroups until none is left.
kill_containers() {
  local i pids dir
  for ((i = 0; i < 100; i++)); do
    pids=""
    for dir in $(cgroup_dirs); do
      # A cgroup removed while find walks the tree fails find: what it read still counts.
      pids+=" $(find "$dir" -name cgroup.procs -exec cat {} + 2>/dev/null | tr '\n' ' ' || true)"
    done
    pids="$(echo $pids)"
    [ -n "$pids" ] || return 0
    [ "$i" -gt 0 ] || log "killing the containers' processes: $(echo $pids | tr ' ' '\n' | sort -un | tr '\n' ' ')"
    kill -KILL $pids 2>/dev/null || true
    sleep 0.1
  done
  die "processes survive in the kubepods cgroups: $pids"
}

# remove_runtime_objects: let every running containerd delete its tasks and containers, so the
# shims unmount the root filesystems and exit.
remove_runtime_objects() {
  local d sock id
  for d in $(recorded containerd); do
    daemon_pid "$d" >/dev/null || continue
    sock="$CONTAINERD_SOCK"
    [ "$d" = containerd ] || sock="$(node_run_dir "${d#containerd-}")/containerd/containerd.sock"
    for id in $(timeout 30 ctr --address "$sock" --namespace k8s.io tasks ls -q 2>/dev/null); do
      timeout 30 ctr --address "$sock" --namespace k8s.io tasks delete --force "$id" >/dev/null 2>&1 || true
    done
    for id in $(timeout 30 ctr --address "$sock" --namespace k8s.io containers ls -q 2>/dev/null); do
      timeout 30 ctr --address "$sock" --namespace k8s.io containers delete "$id" >/dev/null 2>&1 || true
    done
  done
}

# stop_shims: the containerd shims outlive a containerd that was killed. Each serves one pod and
# was started with -address naming its containerd's socket, $CONTAINERD_SOCK (the same path in
# every node's mount namespace), which tells this cluster's shims from any other containerd's.
stop_shims() {
  local proc pid exe args
  for proc in /proc/[0-9]*; do
    pid="${proc#/proc/}"
    exe="$(readlink "$proc/exe" 2>/dev/null)" || continue
    [[ "$(basename "$exe")" == containerd-shim* ]] || continue
    args=" $(tr '\0' ' ' <"$proc/cmdline" 2>/dev/null) "
    [[ "$args" == *" -address $CONTAINERD_SOCK "* ]] || continue
    stop_pid "containerd shim $pid" "$pid" 5
  done
}

# our_mounts: mount points under the cluster's directories, deepest first.
our_mounts() {
  awk -v a="$CLUSTER_DIR/" -v b="$RUN_DIR/" -v a0="$CLUSTER_DIR" -v b0="$RUN_DIR" \
    '{ m = $5; if (m == a0 || m == b0 || index(m, a) == 1 || index(m, b) == 1) print length(m), m }' /proc/self/mountinfo |
    sort -rn | cut -d' ' -f2- | uniq
}

unmount_all() {
  local m i
  for ((i = 0; i < 5; i++)); do
    [ -n "$(our_mounts)" ] || return 0
    while read -r m; do
      umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
    done < <(our_mounts)
  done
  die "mounts remain under $CLUSTER_DIR or $RUN_DIR: $(our_mounts | tr '\n' ' ')"
}

remove_cgroups() {
  local dir i
  for ((i = 0; i < 50; i++)); do
    for dir in $(cgroup_dirs); do
      find "$dir" -depth -type d -exec rmdir {} + 2>/dev/null || true
    done
    [ -z "$(cgroup_dirs)" ] && return 0
    sleep 0.1
  done
  die "cgroups remain: $(cgroup_dirs | tr '\n' ' ')"
}

# remove_outside_paths: what the kubelet and containerd created outside the cluster's
# directories. A path that existed before the cluster came up is left, except for the
# kubelet's log links into this cluster's pod logs.
remove_outside_paths() {
  local p link
  [ -r "$CLUSTER_DIR/preexisting" ] || return 0
  for p in "${OUTSIDE_PATHS[@]}"; do
    if grep -qxF "$p" "$CLUSTER_DIR/preexisting"; then
      continue
    fi
    rm -rf "$p"
  done
  if [ -d /var/log/containers ]; then
    for link in /var/log/containers/*.log; do
      [ -L "$link" ] || continue
      [[ "$(readlink "$link")" == "$CLUSTER_DIR"/* ]] && rm -f "$link"
    done
  fi
  return 0
}

remove_state() {
  local entry
  # Nothing may be mounted below the directories any more, or rm would reach into the mounts.
  [ -z "$(our_mounts)" ] || die "refusing to remove $CLUSTER_DIR: mounts remain: $(our_mounts | tr '\n' ' ')"
  if [ -d "$CLUSTER_DIR" ]; then
    for entry in "$CLUSTER_DIR"/* "$CLUSTER_DIR"/.[!.]*; do
      [ -e "$entry" ] || [ -L "$entry" ] || continue
      [ "$entry" = "$LOG_DIR" ] || rm -rf --one-file-system "$entry"
    done
  fi
  rm -rf --one-file-system "$RUN_DIR"
}

was_up=0
for d in "${CONTROL_DAEMONS[@]}" $(recorded containerd) $(recorded kubelet); do
  daemon_pid "$d" >/dev/null && was_up=1
done
[ "$was_up" = 1 ] && log "stopping the cluster" || log "no cluster daemon runs; checking that nothing is left"

stop_daemons 20 kube-controller-manager kube-scheduler coredns $(recorded kubelet)
kill_containers
remove_runtime_objects
stop_daemons 15 $(recorded containerd)
stop_shims
kill_containers
stop_daemons 20 kube-apiserver
stop_daemons 15 etcd
nodes_down
unmount_all
remove_cgroups
remove_outside_paths
remove_state

log "down; the daemons' logs are in $LOG_DIR"
