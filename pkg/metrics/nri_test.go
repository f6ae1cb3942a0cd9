package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestNRIMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := NewNRI(reg, NRILabels{Paths: []string{"nri", "inotify", "informer"}, Enabled: []string{"nri", "informer"},
		Events: []string{"CreateContainer"}, Reasons: []string{"too-large"}})
	if err != nil {
		t.Fatal(err)
	}
	m.Connected(true)
	m.Connected(false)
	m.Connected(true)
	m.Hook("CreateContainer", 3*time.Microsecond)
	m.Hook("CreateContainer", 2*time.Millisecond)
	m.Refused("too-large")
	const want = `
# HELP finegrain_nodeagent_path_enabled 1 for each way the agent learns of new containers on this node (nri: pinned at creation through NRI; inotify; informer; scan), 0 for the others.
# TYPE finegrain_nodeagent_path_enabled gauge
finegrain_nodeagent_path_enabled{path="informer"} 1
finegrain_nodeagent_path_enabled{path="inotify"} 0
finegrain_nodeagent_path_enabled{path="nri"} 1
# HELP finegrain_nodeagent_nri_connected 1 while the runtime has synchronised the NRI plugin on its current connection.
# TYPE finegrain_nodeagent_nri_connected gauge
finegrain_nodeagent_nri_connected 1
# HELP finegrain_nodeagent_nri_connections_total Connections of the NRI plugin the runtime synchronised (the first and every reconnection).
# TYPE finegrain_nodeagent_nri_connections_total counter
finegrain_nodeagent_nri_connections_total 2
# HELP finegrain_nodeagent_nri_refusals_total Containers the NRI plugin refused to let the runtime create, by reason.
# TYPE finegrain_nodeagent_nri_refusals_total counter
finegrain_nodeagent_nri_refusals_total{reason="too-large"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "finegrain_nodeagent_path_enabled", "finegrain_nodeagent_nri_connected",
		"finegrain_nodeagent_nri_connections_total", "finegrain_nodeagent_nri_refusals_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m.hook); n != 1 {
		t.Errorf("hook histograms %d, want 1", n)
	}
	if _, err := NewNRI(reg, NRILabels{}); err == nil {
		t.Error("second registration accepted")
	}
}
