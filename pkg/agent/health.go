package agent

import (
	"fmt"
	"net/http"
	"time"
)

// Handler serves /healthz (the agent's loop is alive) and /readyz (it started and enforces),
// for the DaemonSet's probes. Reporting adds its own endpoints next to these.
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if err := a.Healthy(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := a.Ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// Healthy reports an error when the loop has not run for a long time.
func (a *Agent) Healthy() error {
	limit := max(10*time.Second, 20*a.opts.ReconcileInterval)
	if age := a.d.Now().Sub(time.Unix(0, a.heartbeat.Load())); age > limit {
		return fmt.Errorf("the agent's loop has not run for %s (limit %s)", age.Round(time.Millisecond), limit)
	}
	return nil
}

// Ready reports why the agent does not enforce, or nil when it does.
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
