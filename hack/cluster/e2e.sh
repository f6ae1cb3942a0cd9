#!/usr/bin/env bash
# make e2e: the end-to-end suite (go test -tags e2e ./test/e2e/...) on the local cluster, once per
# kubelet CPU manager policy (none: finegrain's agent pins; static: the kubelet's own pinning,
# the baseline). Cases that need one policy skip under the other. The cluster is brought up as
# needed with the tree's current images; a cluster this run started is torn down at the end.
# A cluster that was already up is used as it is and left up; a pass whose policy it does not
# run is skipped, and the summary says so. The whole run holds the cluster lock, so concurrent
# runs (and make cluster-down) wait for it.
#
# Environment:
#   E2E_POLICIES   passes to run (default "none static")
#   E2E_RUN        go test -run pattern
#   E2E_TIMEOUT    go test -timeout per pass (default 20m)
#   KEEP_CLUSTER=1 leave a cluster this run started up at the end
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

need_root
need_cmd go "golang (Go 1.26 in /usr/local/go/bin on PATH)"
take_lock
start_all=$SECONDS
policies="${E2E_POLICIES:-none static}"
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
  echo "e2e: passes run: ${ran[*]:-none}; failed: ${failed[*]:-none}; skipped: ${skipped[*]:-none}; $((SECONDS - start_all)) s in all" >&2
  exit $rc
}
trap finish EXIT

cd "$FG_ROOT"
go vet -tags e2e ./test/e2e/... || die "go vet -tags e2e ./test/e2e/... failed"

for policy in $policies; do
  if cluster_up; then
    running="$(cluster_setting KUBELET_CPU_POLICY)"
    if [ "$running" != "$policy" ]; then
      if [ "$started" = 0 ]; then
        log "WARNING: the cluster was up before this run with cpu-manager-policy $running; skipping the $policy pass (make cluster-down first to run every pass)"
        skipped+=("$policy")
        continue
      fi
      "$FG_ROOT/hack/cluster/down.sh"
    fi
  fi
  cluster_up || started=1
  KUBELET_CPU_POLICY="$policy" "$FG_ROOT/hack/cluster/up.sh"

  log "e2e pass with cpu-manager-policy $policy"
  pass_start=$SECONDS
  args=(-tags e2e -count=1 -v -timeout "${E2E_TIMEOUT:-20m}")
  [ -z "${E2E_RUN:-}" ] || args+=(-run "$E2E_RUN")
  if go test "${args[@]}" ./test/e2e/...; then
    ran+=("$policy($((SECONDS - pass_start))s)")
  else
    ran+=("$policy($((SECONDS - pass_start))s)")
    failed+=("$policy")
  fi
done
[ ${#failed[@]} -eq 0 ]
