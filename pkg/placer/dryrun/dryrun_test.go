package dryrun

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// TestPlanGolden runs `placer plan` on the fixtures and compares the JSON it prints with the
// reviewed golden files: the dry run's output is a public contract.
func TestPlanGolden(t *testing.T) {
	tests := []struct {
		job, cluster string
		noTaskGroups bool
	}{
		{"job-cpu-scale", "cluster-paper", false},
		{"job-cpu-granularity", "cluster-paper", false},
		{"job-cpu-granularity", "cluster-paper", true},
		{"job-network", "cluster-paper", false},
		{"job-network-wide", "cluster-paper", false},
		{"job-none", "cluster-paper", false},
		{"job-cpu-scale", "cluster-tainted", false},
		{"job-none", "cluster-fragmented", false},
		{"job-network", "cluster-fragmented", false},
		{"job-network", "cluster-stale", false},
		{"job-bad", "cluster-paper", false},
	}
	for _, tc := range tests {
		name := tc.job + "_on_" + tc.cluster
		if tc.noTaskGroups {
			name += "_no-task-groups"
		}
		t.Run(name, func(t *testing.T) {
			opts := Options{
				JobFile:     filepath.Join("testdata", tc.job+".yaml"),
				ClusterFile: filepath.Join("testdata", tc.cluster+".yaml"),
				Output:      "json", SchedulerName: v1alpha1.DefaultSchedulerName, NoTaskGroups: tc.noTaskGroups,
			}
			out, warnings, err := Plan(opts)
			var buf bytes.Buffer
			if werr := Write(&buf, "json", out, warnings, err); werr != nil {
				t.Fatal(werr)
			}
			golden := filepath.Join("testdata", name+".golden.json")
			if *update {
				if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if d := cmp.Diff(string(want), buf.String()); d != "" {
				t.Errorf("output differs from %s (-want +got):\n%s", golden, d)
			}
			if !json.Valid(buf.Bytes()) {
				t.Error("output is not JSON")
			}
		})
	}
}

func TestPlanPodGroup(t *testing.T) {
	out, _, err := Plan(Options{PodGroup: "ml/train", ClusterFile: "testdata/cluster-podgroup.yaml", Output: "text"})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Write(&buf, "text", out, nil, nil); err != nil {
		t.Fatal(err)
	}
	want := "pod group ml/train: 1 nodes, 3 workers, 1 groups (1 nodes used)\n" +
		"WORKER                            TASKS  GROUP NODE                     NUMA\n" +
		"train-0                               -      0 n1                       0\n" +
		"train-1                               -      0 n1                       0\n" +
		"train-2                               -      0 n1                       0\n"
	if buf.String() != want {
		t.Errorf("text output\n%s\nwant\n%s", buf.String(), want)
	}
}

// The same three pods labelled scheduling.x-k8s.io/pod-group take their size from the PodGroup
// the snapshot holds (a List item of kind PodGroup): minMember 2 of 3 plans as the placer does;
// without the PodGroup, or with minResources the cluster lacks, the plan says so.
func TestPlanStandardPodGroup(t *testing.T) {
	data, err := os.ReadFile("testdata/cluster-podgroup.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pods := strings.ReplaceAll(strings.ReplaceAll(string(data), `pod-group.scheduling.x-k8s.io/name: "train"`, `scheduling.x-k8s.io/pod-group: "train"`),
		`      pod-group.scheduling.x-k8s.io/min-available: "3"`+"\n", "")
	group := func(spec string) string {
		return "- apiVersion: scheduling.x-k8s.io/v1alpha1\n  kind: PodGroup\n  metadata: {name: train, namespace: ml}\n  spec: " + spec + "\n"
	}
	dir := t.TempDir()
	plan := func(name, extra string) (*Output, error) {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(pods+extra), 0o644); err != nil {
			t.Fatal(err)
		}
		out, _, err := Plan(Options{PodGroup: "ml/train", ClusterFile: p})
		return out, err
	}
	out, err := plan("group.yaml", group("{minMember: 2}"))
	if err != nil {
		t.Fatal(err)
	}
	if out.Job != "pod group ml/train" || out.Workers != 3 || len(out.Placements) < 2 {
		t.Errorf("plan %+v, want the group's 3 pods, at least minMember 2 placed", out)
	}
	if _, err := plan("none.yaml", ""); err == nil || !strings.Contains(err.Error(), "the cluster snapshot has no PodGroup ml/train: add podgroups") {
		t.Errorf("without the PodGroup: %v", err)
	}
	if _, err := plan("res.yaml", group("{minMember: 2, minResources: {cpu: 1000}}")); err == nil ||
		!strings.Contains(err.Error(), "PodGroup ml/train: the cluster has less free than its minResources: cpu 1k") {
		t.Errorf("minResources: %v", err)
	}
}

func TestPlanInputErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	job := "testdata/job-cpu-scale.yaml"
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"no job", Options{ClusterFile: "testdata/cluster-paper.yaml"}, "give exactly one of --job FILE and --pod-group"},
		{"both", Options{JobFile: job, PodGroup: "a/b", ClusterFile: "testdata/cluster-paper.yaml"}, "give exactly one of"},
		{"no cluster", Options{JobFile: job}, "give --cluster FILE"},
		{"missing cluster", Options{JobFile: job, ClusterFile: filepath.Join(dir, "nope.yaml")}, "open cluster snapshot"},
		{"missing job", Options{JobFile: filepath.Join(dir, "nope.yaml"), ClusterFile: "testdata/cluster-paper.yaml"}, "read job"},
		{"broken cluster", Options{JobFile: job, ClusterFile: write("broken.yaml", "items: [\n")}, "broken.yaml document 0"},
		{"bad pod", Options{JobFile: job, ClusterFile: write("badpod.yaml", "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Pod, metadata: {name: p, namespace: x}, spec: {containers: 7}}\n")},
			"badpod.yaml document 0 item 0: Pod x/p"},
		{"items not a list", Options{JobFile: job, ClusterFile: write("items.yaml", "apiVersion: v1\nkind: List\nitems: 3\n")}, "List items is not a list"},
		{"bad group name", Options{PodGroup: "train", ClusterFile: "testdata/cluster-podgroup.yaml"}, `--pod-group "train": want NAMESPACE/NAME`},
		{"unknown group", Options{PodGroup: "ml/eval", ClusterFile: "testdata/cluster-podgroup.yaml"}, "no pods labelled scheduling.x-k8s.io/pod-group=eval (or pod-group.scheduling.x-k8s.io/name=eval) in namespace ml"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Plan(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// Single objects and typed lists in several documents work as well as a v1 List.
func TestReadsMultiDocumentSnapshots(t *testing.T) {
	data, err := os.ReadFile("testdata/cluster-paper.yaml")
	if err != nil {
		t.Fatal(err)
	}
	items := strings.SplitN(string(data), "items:\n", 2)[1]
	var docs []string
	for _, item := range strings.Split(items, "\n- ")[0:] {
		item = strings.TrimPrefix(item, "- ")
		var b strings.Builder
		for i, line := range strings.Split(item, "\n") {
			if i > 0 {
				line = strings.TrimPrefix(line, "  ")
			}
			b.WriteString(line + "\n")
		}
		docs = append(docs, b.String())
	}
	p := filepath.Join(t.TempDir(), "multi.yaml")
	if err := os.WriteFile(p, []byte(strings.Join(docs, "---\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	multi, _, err := Plan(Options{JobFile: "testdata/job-cpu-scale.yaml", ClusterFile: p})
	if err != nil {
		t.Fatal(err)
	}
	list, _, err := Plan(Options{JobFile: "testdata/job-cpu-scale.yaml", ClusterFile: "testdata/cluster-paper.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(list.Placements, multi.Placements); d != "" {
		t.Errorf("multi-document snapshot planned differently (-list +multi):\n%s", d)
	}
}
