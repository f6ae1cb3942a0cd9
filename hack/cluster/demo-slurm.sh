#!/usr/bin/env bash
# make demo-slurm: a Slurm virtual cluster whose jobs the placer places, on the local cluster
# (docs/slurm.md). Brings the one-node cluster up and deploys finegrain
# as make demo does (the local overlay gives the node agent CAP_SYS_NICE, the
# daemonset/slurm-confinement component, and the placer runs the virtual-cluster controller and
# the delegation bridge), then:
#   1. creates VirtualCluster finegrain-demo-slurm/demo (demo/virtualcluster.yaml) and waits until
#      it is Ready: its slurmctld and slurmd pods run and slurmctld reports the node up;
#   2. from a shell in its slurmctld pod, sbatch demo/affinity.sbatch, two MPI ranks on one node:
#      squeue shows the job held by finegrain's job_submit.lua, then running once the placer has
#      bound its placeholder pod and the node agent has pinned it;
#   3. the placeholder and its pinned CPU, every process of the job in the placeholder's cpuset,
#      and each rank's Cpus_allowed_list as the rank printed it, all within the pin;
#   4. a second job, which does not fit: squeue shows it pending with finegrain's reason;
#   5. scancel of the first: its placeholder goes, the second job starts on the CPU it returned;
#      scancel of the second: the CPU is back in the shared pool;
#   6. deletes the VirtualCluster and its namespace — also when a step fails, after printing what
#      to look at. The cluster stays up, as after make demo; make cluster-down removes it.
# Every wait has a deadline; a step that fails stops the demo with exit status 1 and says why.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
DEMO_NAME="make demo-slurm"
. "$FG_ROOT/hack/cluster/demolib.sh"

DEMO="$FG_ROOT/hack/cluster/demo"
NS=finegrain-demo-slurm
VC=demo
CTL="$VC-slurmctld"
PLACEHOLDERS="finegrain.dev/workload=slurm-job,finegrain.dev/virtual-cluster=$VC"

need_root
[ -x "$FG_ROOT/bin/kubectl-finegrain" ] || die "bin/kubectl-finegrain is missing: run make build (make demo-slurm does)"
demo_cluster
SLURMD="$VC-slurmd-$NODE"
deploy_finegrain virtualclusters.finegrain.dev noderesourcetopologies.topology.node.k8s.io

# login CMD...: run CMD in the virtual cluster's controller pod, as a user's shell there would,
# showing the command first.
login() {
  printf '[%s]$ %s\n' "$CTL" "$*"
  kubectl -n "$NS" exec "$CTL" -- "$@"
}
# submit: sbatch of demo/affinity.sbatch, as a user's shell in the controller pod would; prints
# sbatch's answer and sets JOB to the job's ID.
submit() {
  local out
  printf '[%s]$ sbatch <affinity.sbatch\n' "$CTL"
  out="$(kubectl -n "$NS" exec -i "$CTL" -- sbatch <"$DEMO/affinity.sbatch" 2>&1)" || slurm_failed "sbatch failed: $out"
  echo "$out"
  JOB="${out##* }"
  [[ "$JOB" =~ ^[0-9]+$ ]] || slurm_failed "sbatch printed $out, not Submitted batch job <ID>"
}
# in_ctl CMD...: run CMD there without showing it, for the demo's own checks.
in_ctl() { kubectl -n "$NS" exec "$CTL" -- "$@"; }
# job_field JOB FORMAT: one squeue field (a --format letter) of a job, ended or not.
job_field() { in_ctl squeue --noheader --states=all --jobs="$1" --format="$2" | sed 's/ *$//'; }
job_running() { [ "$(job_field "$1" %T)" = RUNNING ]; }

# slurm_failed WHY: print what a user would look at, then stop (the exit trap cleans up).
slurm_failed() {
  {
    echo "--- what the demo saw when it stopped"
    in_ctl squeue --states=all || true
    kubectl -n "$NS" get virtualclusters,pods -o wide || true
    kubectl -n "$NS" get events --sort-by=.lastTimestamp | tail -n 15 || true
    kubectl -n "$SYS" logs deploy/finegrain-placer --tail=15 || true
  } >&2
  die "$1"
}

# await SECONDS WHY CMD...: poll CMD every 0.2 s until it succeeds; after SECONDS stop the demo
# with WHY.
await() {
  local deadline=$((SECONDS + $1)) why="$2"
  shift 2
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || slurm_failed "$why"
    sleep 0.2
  done
}

# teardown: delete the VirtualCluster first (its controller would make again the pods a
# namespace's deletion removes), its pods, Secrets and ConfigMap with it, then the namespace.
teardown() {
  kubectl -n "$NS" delete virtualclusters --all --cascade=foreground --wait --timeout=90s >/dev/null &&
    kubectl delete namespace "$NS" --ignore-not-found --wait --timeout=90s >/dev/null
}
vc_ready() { kubectl -n "$NS" wait "virtualcluster/$VC" --for=condition=Ready --timeout=1s; }

# placeholder_of JOB: the name of the job's one placeholder pod, once it exists.
placeholder_of() {
  local pods
  pods="$(kubectl -n "$NS" get pods -l "$PLACEHOLDERS,finegrain.dev/slurm-job=$1" -o name)"
  [ "$(wc -w <<<"$pods")" = 1 ] || return 1
  echo "${pods#pod/}"
}

# pin_of POD: the CPUs of the placeholder's cpuset cgroup, once it holds one CPU (the agent's pin).
pin_of() {
  local dir cpus
  dir="$(cpuset_dir "$NS" "$1" placeholder)" && cpus="$(cat "$dir/cpuset.cpus" 2>/dev/null)" && one_cpu "$cpus" || return 1
  echo "$cpus"
}

# ranks_printed JOB: the job's output, once both ranks have printed their line.
ranks_printed() {
  local out
  out="$(kubectl -n "$NS" exec "$SLURMD" -- cat "/tmp/affinity-$1.out" 2>/dev/null)" || return 1
  [ "$(grep -c '^rank ' <<<"$out")" = 2 ] || return 1
  echo "$out"
}

# waits_with_reason JOB: the job is pending and the bridge's comment says why it is not placed.
waits_with_reason() {
  [ "$(job_field "$1" %T)" = PENDING ] && matches '^finegrain: waiting for placement' "$(job_field "$1" %k)"
}

section "replacing what an earlier demo left"
kubectl -n finegrain-demo delete hpcjobs --all --cascade=foreground --wait --timeout=90s 2>/dev/null &&
  kubectl -n finegrain-demo delete pod/pinned-worker --ignore-not-found --wait --timeout=90s 2>/dev/null || true
teardown || die "the previous run's VirtualCluster or namespace $NS was not deleted within 90 s; see kubectl -n $NS get all,virtualclusters"
wait_free_cpu "$NS"
trap 'rc=$?; section "deleting VirtualCluster $NS/$VC and namespace $NS"; teardown || echo "cluster: ERROR: $NS was not deleted within 90 s; see kubectl -n $NS get all,virtualclusters" >&2; exit $rc' EXIT

section "the node agent may move Slurm jobs' processes: capabilities it adds (daemonset/slurm-confinement)"
caps="$(kubectl -n "$SYS" get daemonset finegrain-nodeagent -o jsonpath='{.spec.template.spec.containers[0].securityContext.capabilities.add}')"
echo "  $caps"
matches SYS_NICE "$caps" ||
  die "the node agent's DaemonSet does not add SYS_NICE; hack/cluster/overlay's components must list daemonset/slurm-confinement"

section "VirtualCluster $NS/$VC: kubectl apply -f hack/cluster/demo/virtualcluster.yaml"
kubectl apply -f "$DEMO/virtualcluster.yaml"
vc_start=$SECONDS
await 120 "VirtualCluster $NS/$VC is not Ready after 120 s; see kubectl -n $NS describe virtualcluster $VC" vc_ready
echo "(Ready after $((SECONDS - vc_start)) s)"
kubectl -n "$NS" get virtualclusters,pods -o wide
section "a shell in the controller pod: kubectl -n $NS exec -it $CTL -- bash"
login sinfo

section "sbatch of an MPI job (hack/cluster/demo/affinity.sbatch): finegrain's job_submit.lua holds it for the placer"
grep -v '^# \|^#!' "$DEMO/affinity.sbatch"
submit
first=$JOB
submitted=$SECONDS
login squeue
await 60 "job $first does not run 60 s after sbatch (squeue above)" job_running "$first"
echo "(running $((SECONDS - submitted)) s after sbatch: the placer bound its placeholder, the agent pinned it, the bridge gave Slurm the node and released the job)"
login squeue

section "the job's placeholder pod, bound by the placer and pinned by the node agent"
holder="$(placeholder_of "$first")" || slurm_failed "job $first runs without exactly one placeholder pod"
await 10 "placeholder $NS/$holder is not pinned to one CPU; see kubectl -n $SYS exec ds/finegrain-nodeagent -- nodeagent pins" pin_of "$holder"
pin="$(pin_of "$holder")"
kubectl -n "$NS" get pods -l "$PLACEHOLDERS" -L finegrain.dev/slurm-job -o wide
finegrain node "$NODE"

section "every process of job $first, in the placeholder's cpuset (the slurmd pod keeps the shared pool)"
show_cpuset "$NS" "$holder" placeholder
show_cpuset "$NS" "$SLURMD" slurmd
procs="$(cat "$(cpuset_dir "$NS" "$holder" placeholder)/cgroup.procs")" ||
  slurm_failed "cannot read the processes of placeholder $NS/$holder's cpuset cgroup"
for pid in $procs; do
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" != pause ] || continue
  proc_line "$pid"
  cpus="$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/$pid/status" 2>/dev/null)" || continue
  [ -z "$cpus" ] || cpus_within "$cpus" "$pin" ||
    slurm_failed "process $pid of job $first may run on CPUs $cpus, outside its placeholder's pin $pin"
done

section "what each rank printed (/tmp/affinity-$first.out on the job's node, read in $SLURMD)"
await 30 "job $first's two ranks did not print their CPUs within 30 s; see kubectl -n $NS exec $SLURMD -- cat /tmp/affinity-$first.out" ranks_printed "$first"
ranks="$(ranks_printed "$first")"
echo "$ranks"
while read -r line; do
  cpus="${line##* }"
  cpus_within "$cpus" "$pin" || slurm_failed "a rank of job $first runs on CPUs $cpus, outside its placeholder's pin $pin: $line"
done < <(grep '^rank ' <<<"$ranks")
echo "(every rank within CPU $pin, the placeholder's pin)"

section "a second job: the node's one exclusive CPU is taken, so it waits, squeue saying why"
submit
second=$JOB
await 30 "job $second is not pending with finegrain's reason (waiting for placement) 30 s after sbatch (squeue above)" waits_with_reason "$second"
login squeue

section "scancel $first: its placeholder goes and the CPU passes to the waiting job"
cancel_ns="$(date +%s%N)"
login scancel "$first"
kubectl -n "$NS" wait "pod/$holder" --for=delete --timeout=10s >/dev/null ||
  slurm_failed "placeholder $holder of job $first is still there 10 s after scancel"
echo "(placeholder $holder deleted $((($(date +%s%N) - cancel_ns) / 1000000)) ms after scancel, as kubectl saw it)"
await 60 "job $second does not run 60 s after job $first was cancelled (squeue above)" job_running "$second"
echo "(job $second running $((($(date +%s%N) - cancel_ns) / 1000000)) ms after scancel $first)"
login squeue
kubectl -n "$NS" get pods -l "$PLACEHOLDERS" -L finegrain.dev/slurm-job -o wide

section "scancel $second: CPU $pin back in the shared pool"
login scancel "$second"
await 30 "CPU $pin is not back in the shared pool 30 s after scancel $second; see nodeagent pins and the agent's log" in_shared_pool "$pin"
agent_pins
login squeue --states=all

trap - EXIT
section "deleting VirtualCluster $NS/$VC and namespace $NS"
teardown_start=$SECONDS
teardown || die "$NS was not deleted within 90 s; see kubectl -n $NS get all,virtualclusters"
cat <<EOF
(deleted in $((SECONDS - teardown_start)) s)

The demo took $((SECONDS - demo_start)) s. The cluster stays up; your own virtual cluster:
  export KUBECONFIG=$ADMIN_KUBECONFIG PATH=$KUBE_BIN:$FG_ROOT/bin:\$PATH
  kubectl apply -f hack/cluster/demo/virtualcluster.yaml
  kubectl -n $NS exec -it $CTL -- bash        # sinfo, sbatch, squeue, scancel
Remove it with: make cluster-down
EOF
