#!/usr/bin/env bash
# make bench-dc-objective: the data-centre objective benchmark (issue 20, bench/dcobjective) on a
# local cluster of two nodes that this script brings up and tears down, holding the cluster lock
# throughout. It refuses to run while someone else's cluster is up (restarting it with two nodes
# would throw their work away).
#
#  1. NODES=2 hack/cluster/up.sh (it builds and imports the images, cpuservice among them);
#  2. finegrain (the cluster's overlay: agents, the placer with its ServiceObjective loop);
#  3. metrics-server v0.8.0 (hack/metrics-server/build.sh, from the module proxy) as a host
#     process on the nodes' bridge, scraping the kubelets' /metrics/resource, behind the
#     APIService v1beta1.metrics.k8s.io: the resource metrics API the HorizontalPodAutoscaler
#     controller of kube-controller-manager reads;
#  4. bin/dcobjective: the arms none, hpa and finegrain, each on the same load trace, into
#     $DC_OBJECTIVE_OUT (default _output/dc-objective): result.json and result.png;
#  5. metrics-server stopped and the cluster torn down, whatever happened.
#
# Environment: DC_OBJECTIVE_FLAGS (extra bin/dcobjective flags, e.g. -arms hpa), DC_OBJECTIVE_OUT.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../../hack/cluster/lib.sh"

need_root
need_cmd openssl
bin="$FG_ROOT/bin/dcobjective"
[ -x "$bin" ] || die "$bin is missing: build it with go build -o bin/dcobjective ./bench/dcobjective (make bench-dc-objective does)"
out="${DC_OBJECTIVE_OUT:-$FG_ROOT/_output/dc-objective}"
read -r -a extra <<<"${DC_OBJECTIVE_FLAGS:-}"
ms_dir="$("$FG_ROOT/hack/metrics-server/build.sh")" || die "could not build metrics-server (hack/metrics-server/build.sh)"
take_lock
if cluster_up; then
  die "a cluster is up already (someone else's?); make bench-dc-objective brings up its own two-node cluster: wait for make cluster-down"
fi

finish() {
  local rc=$?
  stop_daemons 10 metrics-server || rc=1
  log "tearing down the cluster this run brought up"
  "$FG_ROOT/hack/cluster/down.sh" || rc=1
  exit $rc
}
trap finish EXIT

NODES=2 "$FG_ROOT/hack/cluster/up.sh"
KUBE_BIN="$(cluster_setting KUBE_BIN)"
OVERLAY="$(cluster_setting OVERLAY)"
kubectl() { "$KUBE_BIN/kubectl" --kubeconfig "$ADMIN_KUBECONFIG" "$@"; }

log "deploying finegrain ($OVERLAY)"
kubectl apply -k "$FG_ROOT/$OVERLAY" >/dev/null
kubectl wait --for condition=established --timeout=60s crd/hpcjobs.finegrain.dev crd/serviceobjectives.finegrain.dev >/dev/null ||
  die "the HPCJob and ServiceObjective CRDs are not served after 60 s"
for w in $(kubectl -n finegrain-system get daemonsets,deployments -o name); do
  kubectl -n finegrain-system rollout status "$w" --timeout=180s >/dev/null ||
    die "$w in finegrain-system did not become ready; see kubectl -n finegrain-system describe $w"
done

# metrics-server serves on the host's bridge address, with a certificate of the cluster CA for the
# name the aggregator checks (SERVICE.NAMESPACE.svc); the Service of type ExternalName leads the
# aggregator there without a Service network (the local cluster has no kube-proxy).
log "starting metrics-server ($ms_dir) on $NODES_HOST_IP:4443"
ms_pki="$CLUSTER_DIR/metrics-server"
mkdir -p "$ms_pki"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$ms_pki/tls.key" 2>/dev/null
openssl req -new -key "$ms_pki/tls.key" -subj /CN=metrics-server -out "$ms_pki/tls.csr" 2>/dev/null
printf 'basicConstraints = critical, CA:FALSE\nkeyUsage = critical, digitalSignature, keyEncipherment\nextendedKeyUsage = serverAuth\nsubjectAltName = DNS:metrics-server.kube-system.svc, IP:%s\n' \
  "$NODES_HOST_IP" >"$ms_pki/tls.ext"
openssl x509 -req -in "$ms_pki/tls.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -set_serial "0x$(openssl rand -hex 16)" \
  -days 2 -extfile "$ms_pki/tls.ext" -out "$ms_pki/tls.crt" 2>/dev/null || die "openssl could not issue metrics-server's certificate"
start_daemon metrics-server "$ms_dir/metrics-server" \
  --bind-address "$NODES_HOST_IP" --secure-port 4443 \
  --tls-cert-file "$ms_pki/tls.crt" --tls-private-key-file "$ms_pki/tls.key" \
  --kubeconfig "$ADMIN_KUBECONFIG" --authentication-kubeconfig "$ADMIN_KUBECONFIG" --authorization-kubeconfig "$ADMIN_KUBECONFIG" \
  --kubelet-preferred-address-types InternalIP --kubelet-certificate-authority "$PKI/ca.crt" \
  --metric-resolution 15s --v=1
kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Service
metadata: {name: metrics-server, namespace: kube-system}
spec: {type: ExternalName, externalName: "$NODES_HOST_IP", ports: [{name: https, port: 4443}]}
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1beta1.metrics.k8s.io}
spec:
  group: metrics.k8s.io
  version: v1beta1
  groupPriorityMinimum: 100
  versionPriority: 100
  service: {name: metrics-server, namespace: kube-system, port: 4443}
  caBundle: $(base64 -w0 "$PKI/ca.crt")
EOF
nodes_metrics() { kubectl get --raw /apis/metrics.k8s.io/v1beta1/nodes 2>/dev/null | grep -q '"usage"'; }
wait_for "the metrics API to report the nodes' usage" 90 metrics-server nodes_metrics

roots=""
read -r -a names <<<"$(cluster_setting NODE_NAMES)"
read -r -a croots <<<"$(cluster_setting NODE_CGROUP_ROOTS)"
for i in "${!names[@]}"; do roots+="${roots:+,}${names[$i]}=${croots[$i]}"; done
log "running the arms (bin/dcobjective ${extra[*]}) into $out"
"$bin" -kubeconfig "$ADMIN_KUBECONFIG" -cgroup-roots "$roots" -out "$out" "${extra[@]}"
