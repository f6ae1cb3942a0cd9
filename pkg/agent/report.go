package agent

import "github.com/finegrain-dev/finegrain/pkg/topology"

// Started is closed once the agent rebuilt its state and enforces; a report that must not
// publish the empty state of an agent still starting waits for it.
func (a *Agent) Started() <-chan struct{} { return a.startedCh }

// Topology returns the machine the agent places onto.
func (a *Agent) Topology() *topology.Topology { return a.d.Topology }
