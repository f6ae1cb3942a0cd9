#!/usr/bin/env bash
# make e2e: the MPI image's own test (images/mpi/imagetest), then the end-to-end suite
# (go test -tags e2e ./test/e2e/...) on the local cluster, once per
# kubelet CPU manager policy (none: finegrain's agent pins; static: the kubelet's own pinning,
# the baseline) on containerd 1.6, where the agent pins through inotify, then the pinning suite
# once more on containerd 2 with NRI (CONTAINERD=2), where it pins at container creation, then
# the multi-node suite (TestMultiNode*) on a cluster of three nodes (NODES=3: gangs spread by task
# group, placement policies, exclusive nodes, Open MPI across nodes on the pod network, a node
# lost), and Slurm's virtual clusters and their delegation to the placer (TestSlurm*). The policy-none pass also runs the scheduler-plugins scheduler (hack/scheduler-plugins, built
# here, cached) beside finegrain (TestSchedulerPlugins*); the multi-node pass also runs MPI Operator
# (hack/mpi-operator, built here, cached) with finegrain's placer as its gang scheduler
# (TestMultiNodeMPIOperatorJob). Cases that need one policy, runtime or node count skip under the
# others. The cluster is
# brought up as
# needed with the tree's current images; a cluster this run started is torn down at the end.
# A cluster that was already up is used as it is and left up; a pass whose policy it does not
# run is skipped, and the summary says so. The whole run holds the cluster lock, so concurrent
# runs (and make cluster-down) wait for it.
#
# Environment:
#   E2E_POLICIES   containerd 1.6 passes to run (default "none static"; empty: none)
#   E2E_NRI        1 (default) adds the containerd 2 pass (policy none, fail-closed NRI); 0 skips it
#   E2E_RUN        go test -run pattern (every pass)
#   E2E_NRI_RUN    go test -run pattern of the containerd 2 pass when E2E_RUN is unset (default:
#                  the pinning suite, TestAgent|TestNRI|TestFreeCoreMap)
#   E2E_NODES      nodes of the multi-node pass (default 3, what its suite needs; 0 skips it)
#   E2E_NODES_RUN  go test -run pattern of the multi-node pass when E2E_RUN is unset (default
#                  TestMultiNode|TestSlurm)
#   E2E_TIMEOUT    go test -timeout per pass (default 20m)
#   KEEP_CLUSTER=1 leave a cluster this run started up at the end
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

need_root
need_cmd go "golang (Go 1.26 in /usr/local/go/bin on PATH)"
take_lock
start_all=$SECONDS
# Passes as POLICY:CONTAINERD:NODES.
passes=()
for policy in ${E2E_POLICIES-none static}; do passes+=("$policy:1:1"); done
[ "${E2E_NRI:-1}" = 0 ] || passes+=("none:2:1")
case "${E2E_NODES:-3}" in
  0) ;;
  [2-9]) passes+=("none:1:${E2E_NODES:-3}") ;;
  *) die "E2E_NODES=$E2E_NODES: use 2 to 9 nodes for the multi-node pass (default 3), or 0 to skip it" ;;
esac
started=0
ran=()
skipped=()
failed=()

finish() {
  local rc=$?
  if [ "$started" = 1 ] && [ "${KEEP_CLUSTER:-0}" != 1 ]; then
    "$FG_ROOT/hack/cluster/down.sh" || rc=1
  elif [ "$started" = 1 ]; then
    log "KEEP_CLUSTER=1: the cluster stays up (make cluster-down removes it)"
  fi
  echo "e2e: passes run: ${ran[*]:-none}; failed: ${failed[*]:-no pass}; skipped: ${skipped[*]:-no pass}; $((SECONDS - start_all)) s in all" >&2
  exit $rc
}
trap finish EXIT

cd "$FG_ROOT"
go vet -tags e2e ./test/e2e/... || die "go vet -tags e2e ./test/e2e/... failed"
# kwok, the fake nodes' kubelet of TestChaosPlacerAndAPIServerMidBind (the none pass). Without it
# that test skips, saying why.
if kwok="$(kwok_bin)"; then
  export FINEGRAIN_KWOK="$kwok"
else
  log "WARNING: could not install kwok $KWOK_VERSION; TestChaosPlacerAndAPIServerMidBind will skip"
fi

# The MPI image on its own first (images/mpi/imagetest): workers and launchers of the image in
# namespaces of their own, both MPIs over ssh, binding inside a cpuset; no cluster needed.
"$FG_ROOT/hack/images/build.sh" || die "could not build the images (hack/images/build.sh)"
image_start=$SECONDS
if FINEGRAIN_MPI_IMAGE="$FG_ROOT/_output/images/mpi.tar" go test -count=1 -v ./images/mpi/imagetest; then
  ran+=("mpi-image($((SECONDS - image_start))s)")
else
  ran+=("mpi-image($((SECONDS - image_start))s)")
  failed+=("mpi-image")
fi

# The scheduler-plugins scheduler that TestSchedulerPluginsBesideTheAgent runs beside finegrain
# (cold: about 6 minutes on 2 cores; cached afterwards). Without it that test skips, saying why.
if sp_dir="$("$FG_ROOT/hack/scheduler-plugins/build.sh")"; then
  export FINEGRAIN_SCHEDULER_PLUGINS="$sp_dir/kube-scheduler-plugins"
else
  log "WARNING: hack/scheduler-plugins/build.sh failed; TestSchedulerPluginsBesideTheAgent will skip"
fi
# MPI Operator and its MPIJob CRD for TestMultiNodeMPIOperatorJob (cold: about 6 minutes on 2
# cores; cached afterwards). Without them that test skips, saying why.
if mo_dir="$("$FG_ROOT/hack/mpi-operator/build.sh")"; then
  export FINEGRAIN_MPI_OPERATOR="$mo_dir"
else
  log "WARNING: hack/mpi-operator/build.sh failed; TestMultiNodeMPIOperatorJob will skip"
fi

for pass in "${passes[@]}"; do
  IFS=: read -r policy containerd nodes <<<"$pass"
  name="$policy"
  [ "$containerd" = 1 ] || name="$name+containerd$containerd"
  [ "$nodes" = 1 ] || name="$name+${nodes}nodes"
  if cluster_up; then
    running_containerd="$(cluster_setting CONTAINERD)" running_nodes="$(cluster_setting NODES)"
    running="$(cluster_setting KUBELET_CPU_POLICY):${running_containerd:-1}:${running_nodes:-1}"
    if [ "$running" != "$pass" ]; then
      if [ "$started" = 0 ]; then
        log "WARNING: the cluster was up before this run with cpu-manager-policy, containerd and nodes $running; skipping the $name pass (make cluster-down first to run every pass)"
        skipped+=("$name")
        continue
      fi
      "$FG_ROOT/hack/cluster/down.sh"
    fi
  fi
  cluster_up || started=1
  pass_start=$SECONDS
  KUBELET_CPU_POLICY="$policy" CONTAINERD="$containerd" NODES="$nodes" "$FG_ROOT/hack/cluster/up.sh"
  # A cluster left up by make demo still runs the demo's pinned pods, which would hold the CPUs
  # the tests pin.
  kubectl_admin="$(cluster_setting KUBE_BIN)/kubectl --kubeconfig $ADMIN_KUBECONFIG"
  if $kubectl_admin get namespace finegrain-demo >/dev/null 2>&1; then
    log "removing the demo's namespace finegrain-demo from the running cluster"
    $kubectl_admin delete namespace finegrain-demo --wait --timeout=120s
  fi

  log "e2e pass with cpu-manager-policy $policy on containerd $containerd, $nodes node(s)"
  args=(-tags e2e -count=1 -v -timeout "${E2E_TIMEOUT:-20m}")
  run="${E2E_RUN:-}"
  [ "$containerd" = 1 ] || run="${E2E_RUN:-${E2E_NRI_RUN:-TestAgent|TestNRI|TestFreeCoreMap}}"
  [ "$nodes" = 1 ] || run="${E2E_RUN:-${E2E_NODES_RUN:-TestMultiNode|TestSlurm}}"
  [ -z "$run" ] || args+=(-run "$run")
  if go test "${args[@]}" ./test/e2e/...; then
    ran+=("$name($((SECONDS - pass_start))s)")
  else
    ran+=("$name($((SECONDS - pass_start))s)")
    failed+=("$name")
  fi
done
[ ${#failed[@]} -eq 0 ]
