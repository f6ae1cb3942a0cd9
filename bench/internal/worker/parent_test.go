package worker

import (
	"testing"

	"github.com/finegrain-dev/finegrain/bench/internal/result"
)

// The backend of an EP run is what its ranks report, not this binary's build.
func TestRanksBackend(t *testing.T) {
	rank := func(backend string) result.Process {
		return result.Process{DGEMM: &result.DGEMMStats{N: 64, Backend: backend}}
	}
	for _, tc := range []struct {
		ps   []result.Process
		want string
	}{
		{[]result.Process{rank("openblas 0.3.21"), rank("openblas 0.3.21")}, "openblas 0.3.21"},
		{[]result.Process{rank("openblas 0.3.21"), rank("gonum")}, "openblas 0.3.21 / gonum"},
		{[]result.Process{{}}, ""},
	} {
		if got := ranksBackend(tc.ps); got != tc.want {
			t.Errorf("ranksBackend = %q, want %q", got, tc.want)
		}
	}
}
