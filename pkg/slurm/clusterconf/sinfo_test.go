package clusterconf

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// testdata/sinfo-22.05.json is `sinfo --json` of Slurm 22.05.8 (two nodes, one drained), with
// the fields the controller does not read cut away.
func TestParseNodeStates(t *testing.T) {
	data, err := os.ReadFile("testdata/sinfo-22.05.json")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseNodeStates(data)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"node-a": "IDLE", "node-b": "IDLE+DRAIN"}, got); diff != "" {
		t.Errorf("states (-want +got):\n%s", diff)
	}
}

func TestParseNodeStatesErrors(t *testing.T) {
	for _, tt := range []struct{ name, data, want string }{
		{"not JSON", "sinfo: error", "read sinfo --json output"},
		{"Slurm's errors", `{"errors":[{"error":"Unable to contact slurm controller","error_number":1}],"nodes":[]}`, "sinfo reported: Unable to contact slurm controller"},
		{"nameless node", `{"nodes":[{"state":"idle"}]}`, "a node without a name"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ParseNodeStates([]byte(tt.data)); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func FuzzParseNodeStates(f *testing.F) {
	if data, err := os.ReadFile("testdata/sinfo-22.05.json"); err == nil {
		f.Add(data)
	}
	f.Add([]byte(`{"nodes":[{"name":"a","state":"down","state_flags":["NOT_RESPONDING"]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		states, err := ParseNodeStates(data)
		if err != nil {
			return
		}
		for name, state := range states {
			base, _, _ := strings.Cut(state, "+")
			if name == "" || base != strings.ToUpper(base) {
				t.Errorf("node %q state %q: want a named node and an upper-case base state", name, state)
			}
		}
	})
}
