#!/usr/bin/env bash
# make bench-pinning-cluster: the pinning scenarios as pods on the local cluster (bin/pinning
# -on-cluster), holding the cluster lock for the whole run, then one report of every part in
# $PINNING_CLUSTER_OUT (default _output/pinning-cluster).
#
# - No cluster up: this run brings one up with the kubelet's CPU manager policy none (alone,
#   unmanaged, exclusive, coarse, fine; the node agent is deployed for the scenarios that need it),
#   then restarts it with the static policy (alone, unmanaged, kubelet-static), and tears it down
#   at the end, as it found the machine.
# - A cluster up: it is used as it is (its policy decides which scenarios run; the other policy's
#   need a restart, which would throw away other people's objects, so they are left out with a
#   note) and left up, with the node agent deployed or not as it was found. Only the worker image
#   is refreshed in it (the bench needs the tree's fgworker); the others stay.
#
# Environment: PINNING_CLUSTER_FLAGS (extra bin/pinning flags, e.g. -repeats 3),
# PINNING_CLUSTER_OUT (output directory).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../../hack/cluster/lib.sh"

need_root
bin="$FG_ROOT/bin/pinning"
[ -x "$bin" ] || die "$bin is missing: build it with go build -o bin/pinning ./bench/pinning (make bench-pinning-cluster does)"
out="${PINNING_CLUSTER_OUT:-$FG_ROOT/_output/pinning-cluster}"
read -r -a extra <<<"${PINNING_CLUSTER_FLAGS:-}"
take_lock

started=0
parts=()
notes=()
finish() {
  local rc=$?
  if [ "$started" = 1 ]; then
    log "tearing down the cluster this run brought up"
    "$FG_ROOT/hack/cluster/down.sh" || rc=1
  fi
  exit $rc
}
trap finish EXIT

# measure POLICY SCENARIOS: one part of the run on the cluster that is up now.
measure() {
  local dir="$out/$1"
  rm -rf "$dir"
  log "measuring $2 on the cluster with kubelet cpu-manager-policy $1"
  "$bin" -on-cluster -scenarios "$2" \
    -kubeconfig "$ADMIN_KUBECONFIG" -kubectl "$(cluster_setting KUBE_BIN)/kubectl" \
    -kubelet-root "$KUBELET_ROOT" -overlay "$FG_ROOT/hack/cluster/overlay" \
    -out "$dir" "${extra[@]}"
  parts+=("$dir")
}

# up POLICY: bring the cluster up with Debian's containerd 1.6 and the given kubelet policy.
up() {
  KUBELET_CPU_POLICY="$1" CONTAINERD=1 "$FG_ROOT/hack/cluster/up.sh"
}

with_none="alone,unmanaged,exclusive,coarse,fine"
with_static="alone,unmanaged,kubelet-static"
if cluster_up; then
  policy="$(cluster_setting KUBELET_CPU_POLICY)"
  log "the cluster is up (policy $policy, containerd $(cluster_setting CONTAINERD)); using it as it is and leaving it up"
  "$FG_ROOT/hack/images/build.sh" || die "could not build the images (hack/images/build.sh)"
  [ -z "$(cluster_setting CONTAINERD_BIN)" ] || PATH="$(cluster_setting CONTAINERD_BIN):$PATH"
  ctr_k8s images import "$FG_ROOT/_output/images/worker.tar" >/dev/null ||
    die "ctr could not import the worker image into the cluster's containerd"
  if [ "$policy" = static ]; then
    measure static "$with_static"
    notes+=("pods: exclusive, coarse and fine not run: the cluster was up before this run with the kubelet's static policy, and restarting it with policy none would throw away what others run on it; run make bench-pinning-cluster while no cluster is up to measure every scenario")
  else
    measure none "$with_none"
    notes+=("pods: kubelet-static not run: the cluster was up before this run with policy $policy, and restarting it with the static policy would throw away what others run on it; run make bench-pinning-cluster while no cluster is up to measure every scenario")
  fi
else
  started=1
  up none
  measure none "$with_none"
  "$FG_ROOT/hack/cluster/down.sh"
  up static
  measure static "$with_static"
fi

note_flags=()
for n in "${notes[@]}"; do note_flags+=(-note "$n"); done
"$bin" -merge "$(IFS=,; echo "${parts[*]}")" -out "$out" "${note_flags[@]}" "${extra[@]}"
