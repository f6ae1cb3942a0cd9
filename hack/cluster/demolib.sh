# Shared by the demos on the local cluster, demo.sh (make demo) and demo-slurm.sh (make
# demo-slurm). Sourced after lib.sh, with DEMO_NAME set to the make target, which the messages
# name. demo_cluster brings up (or reuses) the one-node cluster, deploy_finegrain deploys the local
# overlay of daemonset/ on it; the other helpers show and check what the node agent and the kernel
# hold.

SYS=finegrain-system

kubectl() { "$KUBE_BIN/kubectl" --kubeconfig "$ADMIN_KUBECONFIG" "$@"; }
finegrain() { "$FG_ROOT/bin/kubectl-finegrain" --kubeconfig "$ADMIN_KUBECONFIG" "$@"; }
agent_pins() { kubectl -n "$SYS" exec ds/finegrain-nodeagent -- nodeagent pins "$@"; }
section() { printf '\n== %s\n' "$*"; }
# Checks read whole outputs before matching them: grep -q closing a pipe early would fail the
# pipeline under pipefail.
matches() { grep -Eq "$1" <<<"$2"; }

# demo_cluster: take the cluster lock (held until the demo exits), bring the local cluster up with
# the tree's images (a running cluster is reused as it is, on its own runtime) and set KUBE_BIN,
# NODE and demo_start (SECONDS once the lock is held). The demos read the node's cgroups where a
# single node keeps them, and need the kubelet's none policy, beside which the node agent pins.
demo_cluster() {
  take_lock
  demo_start=$SECONDS
  # Reuse a running cluster's runtime instead of refusing it (up.sh insists on the one asked for).
  if [ -z "${CONTAINERD:-}" ] && cluster_up; then
    CONTAINERD="$(cluster_setting CONTAINERD)"
    export CONTAINERD="${CONTAINERD:-1}"
  fi
  [ "${NODES:-1}" = 1 ] || die "$DEMO_NAME runs on one node; NODES=$NODES is for make cluster-up and make e2e"
  if cluster_up && [ "$(cluster_setting NODES)" -gt 1 ] 2>/dev/null; then
    die "the cluster is up with NODES=$(cluster_setting NODES); $DEMO_NAME runs on one node: make cluster-down, then $DEMO_NAME"
  fi
  "$FG_ROOT/hack/cluster/up.sh"
  [ "$(cluster_setting KUBELET_CPU_POLICY)" = none ] ||
    die "the cluster's kubelet runs cpu-manager-policy $(cluster_setting KUBELET_CPU_POLICY), which the node agent refuses to fight; make cluster-down, then $DEMO_NAME"
  KUBE_BIN="$(cluster_setting KUBE_BIN)"
  NODE="$(cluster_setting NODE_NAME)"
}

# rollout_all: wait until every DaemonSet and Deployment of finegrain runs its current template.
rollout_all() {
  local w
  for w in $(kubectl -n "$SYS" get daemonsets,deployments -o name); do
    kubectl -n "$SYS" rollout status "$w" --timeout=120s ||
      die "$w in $SYS did not become ready; see kubectl -n $SYS describe $w and its pods' logs"
  done
}

# deploy_finegrain CRD...: apply hack/cluster/overlay, wait until the named CRDs are served and
# every workload runs, and restart what still runs an older localhost/finegrain:dev than the
# tree's.
deploy_finegrain() {
  local digest image_id running
  section "kubectl apply -k hack/cluster/overlay"
  kubectl apply -k "$FG_ROOT/hack/cluster/overlay"
  kubectl wait --for condition=established --timeout=60s "${@/#/crd/}" ||
    die "the CRDs $* are not served after 60 s; see kubectl describe crd $1 and the API server's log in $LOG_DIR"
  rollout_all
  # The image tags stay :dev, so pods started before this tree's images were imported still run
  # the old binaries: restart them. The image ID the kubelet reports is the digest of the image's
  # config, which the manifest of localhost/finegrain:dev names.
  digest="$(ctr_k8s images ls "name==localhost/finegrain:dev" | awk 'NR > 1 { print $3 }')"
  image_id="$(ctr_k8s content get "$digest" 2>/dev/null | sed -n 's/.*"config":{[^}]*"digest":"\(sha256:[0-9a-f]*\)".*/\1/p')"
  running="$(kubectl -n "$SYS" get pods -o jsonpath='{range .items[*]}{.status.containerStatuses[*].imageID}{"\n"}{end}' | sort -u)"
  if [ -z "$image_id" ] || [ "$running" != "$image_id" ]; then
    echo "(restarting finegrain's pods: they run an older localhost/finegrain:dev than this tree's)"
    kubectl -n "$SYS" rollout restart daemonset,deployment
    rollout_all
  fi
}

# cpus_of LIST: the CPUs of a kernel CPU list ("0-2,5"), one per line.
cpus_of() {
  local r IFS=,
  for r in $1; do
    if [[ "$r" == *-* ]]; then seq "${r%-*}" "${r#*-}"; else echo "$r"; fi
  done
}

# cpus_within LIST PIN: whether every CPU of LIST is one of PIN.
cpus_within() {
  local cpu pin
  pin="$(cpus_of "$2")"
  [ -n "$1" ] || return 1
  for cpu in $(cpus_of "$1"); do matches "^$cpu\$" "$pin" || return 1; done
}

# one_cpu LIST: whether a kernel CPU list holds exactly one CPU.
one_cpu() { [[ "$1" =~ ^[0-9]+$ ]]; }

# in_shared_pool LIST: whether the agent's shared pool holds every CPU of LIST.
in_shared_pool() {
  local view
  view="$(agent_pins -o json)" || return 1
  cpus_within "$1" "$(sed -n 's/^ *"sharedCPUs": "\([^"]*\)".*/\1/p' <<<"$view")"
}

# wait_free_cpu NS: wait until a NUMA node of the node has a CPU for an exclusive container (the
# agent releases the CPUs of deleted pods at once); pods outside NS holding them stop the demo.
wait_free_cpu() {
  local deadline=$((SECONDS + 30))
  until matches '"available": [1-9]' "$(agent_pins -o json 2>/dev/null)"; do
    if ((SECONDS >= deadline)); then
      agent_pins >&2 || true
      die "no NUMA node of $NODE has a CPU for an exclusive container (AVAILABLE above); pods outside $1 hold them (POOL exclusive): delete them, or make cluster-down"
    fi
    sleep 0.5
  done
}

# cpuset_dir NS POD CONTAINER: the container's cpuset cgroup directory (cgroupfs driver, v1 or
# v2), from the pod's UID, QoS class and container ID.
cpuset_dir() {
  local uid qos id base=/sys/fs/cgroup
  read -r uid qos id < <(kubectl -n "$1" get pod "$2" -o \
    "jsonpath={.metadata.uid} {.status.qosClass} {.status.containerStatuses[?(@.name==\"$3\")].containerID}")
  [ -n "${id:-}" ] || return 1
  [ ! -d /sys/fs/cgroup/cpuset ] || base=/sys/fs/cgroup/cpuset
  case "$qos" in
    Guaranteed) echo "$base/kubepods/pod$uid/${id#*://}" ;;
    Burstable) echo "$base/kubepods/burstable/pod$uid/${id#*://}" ;;
    *) echo "$base/kubepods/besteffort/pod$uid/${id#*://}" ;;
  esac
}

# show_cpuset NS POD CONTAINER: what the container's cgroup holds.
show_cpuset() {
  local dir
  dir="$(cpuset_dir "$@")" && [ -d "$dir" ] || {
    printf '  %-50s %-10s (no cgroup: the container is not running)\n' "$1/$2" "$3"
    return 0
  }
  printf '  %-50s %-10s cpus=%-6s mems=%-4s %s\n' "$1/$2" "$3" "$(cat "$dir/cpuset.cpus")" "$(cat "$dir/cpuset.mems")" "$dir"
}

# proc_line PID: a process's PID, command name, allowed CPUs and memory nodes; nothing when it
# has exited.
proc_line() {
  local comm status
  comm="$(cat "/proc/$1/comm" 2>/dev/null)" && status="$(cat "/proc/$1/status" 2>/dev/null)" || return 0
  printf '  pid %-8s %-12s %s, %s\n' "$1" "$comm" "$(grep Cpus_allowed_list <<<"$status" | tr -s '\t' ' ')" \
    "$(grep Mems_allowed_list <<<"$status" | tr -s '\t' ' ')"
}
