package agent

import (
	"fmt"
	"time"
)

// Healthy reports an error when the agent's loop has not run for a long time (a liveness check).
// While the agent starts, its first step may wait StartupAPITimeout for the pod list.
func (a *Agent) Healthy() error {
	limit := max(10*time.Second, 20*a.opts.ReconcileInterval)
	a.mu.Lock()
	if !a.started {
		limit += a.opts.StartupAPITimeout
	}
	a.mu.Unlock()
	if age := a.d.Now().Sub(time.Unix(0, a.heartbeat.Load())); age > limit {
		return fmt.Errorf("the agent's loop has not run for %s (limit %s)", age.Round(time.Millisecond), limit)
	}
	return nil
}

// Ready reports why the agent does not enforce, or nil when it does (a readiness check).
func (a *Agent) Ready() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.refusing != "":
		return fmt.Errorf("not acting: %s", a.refusing)
	case !a.started:
		return fmt.Errorf("starting: rebuilding state from the checkpoint, the cgroups and the API server")
	}
	return nil
}
