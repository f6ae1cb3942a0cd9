#!/usr/bin/env bash
# make demo: finegrain's main job on the local cluster. Brings the cluster up with the tree's
# images (a running cluster is reused as it is), deploys finegrain (kubectl apply -k
# hack/cluster/overlay, the local overlay of daemonset/) and restarts what still runs an older
# image, then:
#   1. submits demo/hpcjob.yaml, HPCC as an HPCJob sized for this node: the placer binds one
#      worker of one task, the node agent pins it to the one CPU the shared pool's minimum leaves,
#      the worker's sshd becomes ready and the launcher runs `mpirun hpcc` in the shared pool,
#      which starts the rank over SSH inside the pinned worker;
#   2. while it runs: the job, its hostfile and SSH configuration, the cluster's free-core maps
#      (kubectl finegrain), the rank's PID, CPUs and memory node as the agent reads them
#      (kubectl finegrain job), the agent's own view (nodeagent pins, inside its pod) and the
#      cpusets the kernel really holds;
#   3. when the launcher has ended the job (Succeeded): HPCC's headline figures, which the
#      launcher read back from the worker with plain ssh, and the CPU back in the shared pool;
#   4. the standalone pinned pod (demo/pinned-pod.yaml), every container's cpuset and the node's
#      topology.
# Re-running replaces the previous run's job and pod. Every wait has a deadline and says what to
# inspect when it passes. The cluster stays up for exploring; make cluster-down removes it.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
DEMO_NAME="make demo"
. "$FG_ROOT/hack/cluster/demolib.sh"

DEMO="$FG_ROOT/hack/cluster/demo"
NS=finegrain-demo
JOB=hpcc-demo

need_root
[ -x "$FG_ROOT/bin/kubectl-finegrain" ] && [ -x "$FG_ROOT/bin/nodeagent" ] && [ -x "$FG_ROOT/bin/hpcc" ] ||
  die "bin/kubectl-finegrain, bin/nodeagent or bin/hpcc is missing: run make build hpcc-tool (make demo does)"
demo_cluster

# job_field JSONPATH: one field of the demo job.
job_field() { kubectl -n "$NS" get hpcjob "$JOB" -o "jsonpath=$1"; }

# job_failed WHY: stop with the job's status and events, naming what to inspect.
job_failed() {
  kubectl -n "$NS" describe hpcjob "$JOB" >&2 || true
  die "$1; see above, kubectl -n $NS describe hpcjob $JOB and kubectl -n $SYS logs deploy/finegrain-placer"
}

# wait_job_phase SECONDS PHASE...: wait until the job reaches one of the phases; a Failed job or
# the deadline stops the demo.
wait_job_phase() {
  local secs="$1" deadline phase
  shift
  deadline=$((SECONDS + secs))
  while :; do
    phase="$(job_field '{.status.phase}' 2>/dev/null || true)"
    for p in "$@"; do [ "$phase" != "$p" ] || return 0; done
    [ "$phase" != Failed ] || job_failed "HPCJob $NS/$JOB failed"
    ((SECONDS < deadline)) || job_failed "HPCJob $NS/$JOB is ${phase:-without a phase} after ${secs} s, not $*"
    sleep 0.5
  done
}

deploy_finegrain hpcjobs.finegrain.dev noderesourcetopologies.topology.node.k8s.io

section "replacing the previous run's demo objects"
kubectl apply -f "$DEMO/namespace.yaml"
kubectl -n "$NS" delete hpcjobs --all --cascade=foreground --wait --timeout=90s &&
  kubectl -n "$NS" delete pod/pinned-worker --ignore-not-found --wait --timeout=90s ||
  die "the previous demo's objects in $NS were not deleted within 90 s; see kubectl -n $NS get all,hpcjobs"
wait_free_cpu "$NS"

section "HPCJob $NS/$JOB: kubectl apply -f hack/cluster/demo/hpcjob.yaml"
kubectl apply -f "$DEMO/hpcjob.yaml"
wait_job_phase 60 Running Succeeded
worker="$(job_field '{.status.placements[0].worker}')"
launcher="$JOB-launcher"
[ -n "$worker" ] || job_failed "HPCJob $NS/$JOB runs without a placed worker in its status"
# The agent pins the worker as its container starts; wait until the kernel says so.
deadline=$((SECONDS + 60))
pin=""
while :; do
  if dir="$(cpuset_dir "$NS" "$worker" worker 2>/dev/null)" && [ -r "$dir/cpuset.cpus" ]; then
    pin="$(cat "$dir/cpuset.cpus")"
    ! one_cpu "$pin" || break
  fi
  if ((SECONDS >= deadline)); then
    kubectl -n "$NS" describe pod "$worker" >&2 || true
    agent_pins >&2 || true
    die "worker $NS/$worker is not pinned to one CPU after 60 s (cpuset.cpus ${pin:-unreadable}); see above and kubectl -n $SYS logs ds/finegrain-nodeagent"
  fi
  sleep 0.2
done
# kubectl finegrain reads the NodeResourceTopology, which the agent publishes within a second.
deadline=$((SECONDS + 10))
until matches "\"pod\": \"$worker\"" "$(finegrain node "$NODE" -o json)"; do
  ((SECONDS < deadline)) || die "the NodeResourceTopology of $NODE does not show $worker's pin after 10 s; see kubectl get noderesourcetopology $NODE -o yaml and the agent's log"
  sleep 0.2
done

section "kubectl get hpcjobs -n $NS"
kubectl -n "$NS" get hpcjobs
section "hostfile and SSH client configuration (ConfigMap $NS/$JOB-hostfile; the launcher has them at /etc/mpi and /root/.ssh)"
kubectl -n "$NS" get configmap "$JOB-hostfile" -o 'jsonpath={.data.hostfile}{"\n"}{.data.ssh_config}'
section "kubectl finegrain nodes"
finegrain nodes
section "kubectl finegrain node $NODE"
finegrain node "$NODE"

# The launcher starts once the worker's sshd is ready; then mpirun starts the rank in the worker.
deadline=$((SECONDS + 180))
until matches '"command": "hpcc"' "$(finegrain job "$JOB" -n "$NS" -o json 2>/dev/null)"; do
  phase="$(job_field '{.status.phase}' 2>/dev/null || true)"
  [ "$phase" != Failed ] || job_failed "HPCJob $NS/$JOB failed"
  [ "$phase" != Succeeded ] || break
  ((SECONDS < deadline)) || job_failed "no HPCC rank runs in worker $worker 180 s after the job started; see kubectl -n $NS logs $launcher and kubectl -n $NS describe pod $worker"
  sleep 0.3
done
section "kubectl finegrain job $JOB -n $NS: the worker, its pin and the MPI rank inside it (read by the node agent from the worker's cgroup)"
finegrain job "$JOB" -n "$NS"
section "nodeagent pins (kubectl -n $SYS exec ds/finegrain-nodeagent -- nodeagent pins)"
agent_pins
section "the job's cgroups as the kernel holds them: the worker on its exclusive CPU, the launcher in the shared pool"
show_cpuset "$NS" "$worker" worker
show_cpuset "$NS" "$launcher" mpirun
if dir="$(cpuset_dir "$NS" "$worker" worker 2>/dev/null)"; then
  for pid in $(cat "$dir/cgroup.procs" 2>/dev/null); do
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" != hpcc ] || proc_line "$pid"
  done
fi

section "waiting for HPCC to end the job"
wait_job_phase 600 Succeeded
kubectl -n "$NS" get hpcjobs
section "HPCC's headline figures (kubectl -n $NS logs $launcher | bin/hpcc parse)"
kubectl -n "$NS" logs "$launcher" | "$FG_ROOT/bin/hpcc" parse ||
  die "the launcher's log holds no successful HPCC summary; see kubectl -n $NS logs $launcher"
# The placer deletes the job's workers; the agent returns their CPUs to the shared pool.
deadline=$((SECONDS + 30))
until in_shared_pool "$pin"; do
  ((SECONDS < deadline)) || die "CPU $pin is not back in the shared pool 30 s after $JOB ended; see kubectl -n $NS get pods and the agent's log"
  sleep 0.5
done
section "CPU $pin back in the shared pool (nodeagent pins)"
agent_pins

section "the standalone pinned pod: kubectl apply -f hack/cluster/demo/pinned-pod.yaml"
kubectl apply -f "$DEMO/pinned-pod.yaml"
kubectl -n "$NS" wait pod/pinned-worker --for=condition=Ready --timeout=90s ||
  die "pod $NS/pinned-worker did not become ready; see kubectl -n $NS describe pod pinned-worker"
deadline=$((SECONDS + 10))
until dir="$(cpuset_dir "$NS" pinned-worker worker)" && one_cpu "$(cat "$dir/cpuset.cpus")"; do
  ((SECONDS < deadline)) || die "pod $NS/pinned-worker is not pinned to one CPU after 10 s; see nodeagent pins and the agent's log"
  sleep 0.2
done

section "pods"
kubectl get pods -A -o wide
section "cpusets of every container"
kubectl get pods -A -o jsonpath='{range .items[*]}{.metadata.namespace} {.metadata.name}{range .status.containerStatuses[*]} {.name}{end}{"\n"}{end}' |
  while read -r ns pod containers; do
    for c in $containers; do show_cpuset "$ns" "$pod" "$c"; done
  done
section "bin/nodeagent topology"
"$FG_ROOT/bin/nodeagent" topology
cat <<EOF

The demo took $((SECONDS - demo_start)) s. The cluster stays up:
  export KUBECONFIG=$ADMIN_KUBECONFIG PATH=$KUBE_BIN:$FG_ROOT/bin:\$PATH
  kubectl finegrain node $NODE; kubectl -n $SYS exec ds/finegrain-nodeagent -- nodeagent pins
Remove it with: make cluster-down
EOF
