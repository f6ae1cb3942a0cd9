package sim

import (
	"path/filepath"
	"testing"

	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// paperMachine is the fine-grained scheduling paper's node, 2 × Xeon E5-2697 v4, from the
// topology fixtures.
func paperMachine(tb testing.TB) *topology.Topology {
	tb.Helper()
	topo, _, err := LoadMachine(filepath.Join("..", "..", "..", "pkg", "topology", "testdata", "xeon-e5-2697v4-2s", "sys"))
	if err != nil {
		tb.Fatal(err)
	}
	return topo
}
