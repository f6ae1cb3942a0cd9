package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/finegrain-dev/finegrain/internal/hpcc"
)

const staleJob = `# a job
apiVersion: v1
kind: ConfigMap
metadata:
  name: j-hpccinf
data:
  hpccinf.txt: |
    old line 1

    old line 3

  other: x
---
apiVersion: finegrain.dev/v1alpha1
kind: HPCJob
metadata: {name: j}
spec:
  tasks: 6
  taskResources: {cpu: "1", memory: 64Mi}
  futureField: ignored here
`

func TestUpdateExampleRewritesTheBlock(t *testing.T) {
	out, in, err := updateExample([]byte(staleJob), "job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if in.Grid != (hpcc.Grid{P: 2, Q: 3}) {
		t.Errorf("grid %v, want 2×3 for 6 tasks", in.Grid)
	}
	s := string(out)
	for _, want := range []string{
		"data:\n  hpccinf.txt: |\n    hpccinf.txt for HPCC 1.5",
		"    40 9 8 13 13 20 16 32 64 extra PTRANS NBs (unused while their number is 0)\n\n  other: x\n---\n",
		"  futureField: ignored here\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("rewritten file lacks %q:\n%s", want, s)
		}
	}
	again, _, err := updateExample(out, "job.yaml")
	if err != nil || string(again) != s {
		t.Errorf("second update changed the file (%v):\n%s", err, again)
	}

	path := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(path, []byte(staleJob), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCmd(t, "", "inf", "-update", path)
	if code != 0 || !strings.HasPrefix(stdout, "updated "+path+": 6 tasks x 64 MiB: N=") {
		t.Errorf("inf -update: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if got := readFile(t, path); got != s {
		t.Errorf("file after inf -update:\n%s\nwant:\n%s", got, s)
	}
}

func TestUpdateExampleErrors(t *testing.T) {
	for _, tt := range []struct{ name, in, want string }{
		{"no job", staleJob[:strings.Index(staleJob, "---")], "job.yaml: no HPCJob (kind: HPCJob) in the file"},
		{"no ConfigMap", staleJob[strings.Index(staleJob, "---"):], "want one ConfigMap with data.hpccinf.txt, found 0"},
		{"two ConfigMaps", strings.Replace(staleJob, "---\n", "---\n"+staleJob[strings.Index(staleJob, "apiVersion"):strings.Index(staleJob, "---")]+"---\n", 1),
			"found 2 [j-hpccinf j-hpccinf]"},
		{"folded block", strings.Replace(staleJob, "hpccinf.txt: |", "hpccinf.txt: >", 1), `job.yaml: ConfigMap j-hpccinf (document at line 1): data.hpccinf.txt must be a literal block`},
		{"no memory", strings.Replace(staleJob, ", memory: 64Mi", "", 1), "HPCJob j (tasks 6, taskResources.memory 0): memory per task is required"},
		{"bad YAML", staleJob + "  : : :\n\t- x", "job.yaml: document at line 14"},
	} {
		if _, _, err := updateExample([]byte(tt.in), "job.yaml"); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error = %v, want it to contain %q", tt.name, err, tt.want)
		}
	}
}
