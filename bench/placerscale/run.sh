#!/usr/bin/env bash
# make bench-placer-scale: bench/placerscale on the running local cluster, holding the cluster's
# lock (other engineers' cluster scripts wait meanwhile). It never brings the cluster up or down.
# kwok is installed with go install on first use into a versioned cache directory. Arguments go to
# the benchmark (go run ./bench/placerscale -h lists them); its logs, configs, profile and
# results.json land in _output/placerscale/.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../../hack/cluster/lib.sh"

need_root
need_cmd go "golang (Go 1.26 in /usr/local/go/bin on PATH)"
take_lock
cluster_up || die "the local cluster is not up: make cluster-up first"
kwok="$(kwok_bin)" || die "could not install kwok $KWOK_VERSION (go install sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION)"
cd "$FG_ROOT"
# The APIs the benchmark writes (the free-core maps of its fake nodes and the job rounds' HPCJobs)
# and every other the placer watches (PodGroups): its informers must sync before it places.
"$(cluster_setting KUBE_BIN)/kubectl" --kubeconfig "$ADMIN_KUBECONFIG" apply \
  -f daemonset/crds/ -f daemonset/placer/crd-hpcjob.yaml
mkdir -p bin
CGO_ENABLED=0 go build -trimpath -o bin/placer ./cmd/placer
go build -o bin/placerscale ./bench/placerscale
bin/placerscale -kubeconfig "$ADMIN_KUBECONFIG" -kwok "$kwok" \
  -kube-scheduler "$(cluster_setting KUBE_BIN)/kube-scheduler" -placer bin/placer "$@"
