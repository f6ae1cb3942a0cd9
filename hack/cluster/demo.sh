#!/usr/bin/env bash
# make demo: brings the local cluster up with the tree's images, deploys finegrain
# (kubectl apply -k hack/cluster/overlay, the local overlay of daemonset/), waits for what it
# deployed, runs the example pinned pod (demo/pinned-pod.yaml) and shows the pinning and
# topology views: every container's cpuset, and `bin/nodeagent topology` once cmd/nodeagent
# exists. The cluster stays up for exploring; make cluster-down removes it.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

need_root
take_lock
"$FG_ROOT/hack/cluster/up.sh"
KUBE_BIN="$(cluster_setting KUBE_BIN)"
kubectl() { "$KUBE_BIN/kubectl" --kubeconfig "$ADMIN_KUBECONFIG" "$@"; }

echo "== kubectl apply -k hack/cluster/overlay"
kubectl apply -k "$FG_ROOT/hack/cluster/overlay"
workloads="$(kubectl get daemonsets,deployments -n finegrain-system -o name)"
if [ -z "$workloads" ]; then
  echo "(daemonset/ deploys no DaemonSet or Deployment yet)"
fi
for w in $workloads; do
  kubectl rollout status -n finegrain-system "$w" --timeout=120s ||
    die "$w in finegrain-system did not become ready; see kubectl -n finegrain-system describe $w and the pod logs"
done

echo "== the example pinned pod"
kubectl apply -f "$FG_ROOT/hack/cluster/demo/pinned-pod.yaml"
kubectl wait -n finegrain-demo pod/pinned-worker --for=condition=Ready --timeout=90s ||
  die "pod finegrain-demo/pinned-worker did not become ready; see kubectl -n finegrain-demo describe pod pinned-worker"

echo "== pods"
kubectl get pods -A -o wide

echo "== cpusets of every container (cgroup v1 cpuset hierarchy)"
kubectl get pods -A -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name} {.metadata.uid} {.status.qosClass}{range .status.containerStatuses[*]} {.name}={.containerID}{end}{"\n"}{end}' |
  while read -r pod uid qos containers; do
    case "$qos" in
      Guaranteed) dir="kubepods/pod$uid" ;;
      Burstable) dir="kubepods/burstable/pod$uid" ;;
      *) dir="kubepods/besteffort/pod$uid" ;;
    esac
    for c in $containers; do
      id="${c#*=}"
      id="${id#*://}"
      cg="/sys/fs/cgroup/cpuset/$dir/$id"
      [ -d "$cg" ] || continue
      printf '  %-50s %-12s cpus=%-8s mems=%s\n' "$pod" "${c%%=*}" "$(cat "$cg/cpuset.cpus")" "$(cat "$cg/cpuset.mems")"
    done
  done

if [ -x "$FG_ROOT/bin/nodeagent" ]; then
  echo "== bin/nodeagent topology"
  "$FG_ROOT/bin/nodeagent" topology
else
  echo "(bin/nodeagent does not exist yet: no topology view)"
fi
cat <<EOF

The cluster stays up:  export KUBECONFIG=$ADMIN_KUBECONFIG PATH=$KUBE_BIN:\$PATH
Remove it with:        make cluster-down
EOF
