package placer

import (
	"context"
	"errors"
	"net/http"
	"time"

	"k8s.io/client-go/tools/leaderelection"

	"github.com/finegrain-dev/finegrain/pkg/inspect"
)

// leaseHealthTolerance is how long past the Lease's duration a leader that has not renewed it
// is still healthy (kube-scheduler's and kube-controller-manager's value).
const leaseHealthTolerance = 20 * time.Second

// leaseState is what the health checks need of the leader elector.
type leaseState interface {
	IsLeader() bool
	Check(maxTolerableExpiredLease time.Duration) error
}

var _ leaseState = (*leaderelection.LeaderElector)(nil)

// health is what the placer's /healthz and /readyz report, after kube-scheduler's:
//
//   - /healthz (the liveness probe) fails only when this replica leads and has not renewed its
//     Lease for leaseHealthTolerance past the Lease's duration: it should have stopped leading,
//     and a restart lets another replica take over.
//   - /readyz (the readiness probe, which paces rollouts and the PodDisruptionBudget) adds
//     "shutdown", failing once the process is stopping, and "informer-sync": the leader, or the
//     only replica without leader election, is ready once its caches of pods, nodes,
//     NodeResourceTopologies, HPCJobs, events and priority classes have synced, so a new leader
//     is not ready before it can place. A replica waiting on the Lease is ready at once: unlike
//     kube-scheduler's it keeps no caches while it waits (they start when it takes the Lease), so
//     its readiness means that it started, found the APIs it needs and can take over.
type health struct {
	// lease is nil without leader election.
	lease leaseState
	// synced reports whether the controller's caches have synced.
	synced func() bool
}

// register serves /healthz and /readyz on mux; ctx ending is the shutdown /readyz reports.
func (h health) register(ctx context.Context, mux *http.ServeMux) {
	leaderElection := inspect.Check{Name: "leader-election", Run: func(context.Context) error {
		if h.lease == nil {
			return nil
		}
		return h.lease.Check(leaseHealthTolerance)
	}}
	mux.Handle("/healthz", inspect.CheckHandler([]inspect.Check{leaderElection}))
	mux.Handle("/readyz", inspect.CheckHandler([]inspect.Check{
		{Name: "shutdown", Run: func(context.Context) error {
			if ctx.Err() != nil {
				return errors.New("the placer is stopping")
			}
			return nil
		}},
		leaderElection,
		{Name: "informer-sync", Run: func(context.Context) error {
			if h.lease != nil && !h.lease.IsLeader() {
				return nil
			}
			if !h.synced() {
				return errors.New("the caches of pods, nodes, NodeResourceTopologies, HPCJobs, events and priority classes have not synced yet")
			}
			return nil
		}},
	}))
}
