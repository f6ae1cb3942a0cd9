package sim

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestReports(t *testing.T) {
	sc := &Scenario{Machine: "small", Workload: "trace e2e", Jobs: readTestTrace(t, "e2e-4jobs.yaml"),
		Strategies: []Strategy{strategy(t, StrategyKube), strategy(t, StrategyFinegrain)}, Baseline: StrategyKube,
		Options: smallMachineOptions(t, 2, 1, DefaultModel())}
	res, err := sc.Run(2)
	if err != nil {
		t.Fatal(err)
	}
	rep := &Report{Command: "go run ./bench/simulator", Scenarios: []*ScenarioResult{res}}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, rep); err != nil {
		t.Fatal(err)
	}
	k8s, fg := res.Strategies[0], res.Strategies[1]
	for _, want := range []string{
		"Command: `go run ./bench/simulator`",
		"### 2 × small (16 CPUs), 4 jobs: trace e2e",
		"| strategy | done | rejected | response mean |",
		"| k8s | 4 | 0 | " + secs(k8s.Response.Mean) + " |",
		"| +0.0 % | +0.0 % |",
		"| finegrain | 4 | 0 | " + secs(fg.Response.Mean) + " |",
		change(fg.ResponseRatio) + " | " + change(fg.MakespanRatio) + " |",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	if fg.ResponseRatio >= 1 || fg.Stretch >= k8s.Stretch {
		t.Errorf("finegrain should beat floating containers on this trace: %+v vs %+v", fg.Summary, k8s.Summary)
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, rep); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Scenarios []struct {
			Nodes      int
			Baseline   string
			Model      Model
			Strategies []struct {
				Strategy         string
				ResponseRatio    float64
				Response         Stats
				StretchByProfile map[string]float64
			}
		}
	}
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	s := back.Scenarios[0]
	if s.Nodes != 2 || s.Baseline != "k8s" || s.Model != DefaultModel() || s.Strategies[1].Strategy != "finegrain" ||
		s.Strategies[1].ResponseRatio != fg.ResponseRatio || s.Strategies[1].Response != fg.Response || s.Strategies[1].StretchByProfile["cpu"] == 0 {
		t.Errorf("JSON: %+v", s)
	}
	if change(0) != "–" || change(0.65) != "-35.0 %" {
		t.Errorf("change: %q %q", change(0), change(0.65))
	}
	sc.Baseline = "nope"
	if _, err := sc.Run(1); err == nil || !strings.Contains(err.Error(), `baseline strategy "nope"`) {
		t.Errorf("unknown baseline: %v", err)
	}
}

func TestSummarizeSeeds(t *testing.T) {
	sc := func(machine string, nodes int, resp, mk float64) *ScenarioResult {
		return &ScenarioResult{Machine: machine, Nodes: nodes, Baseline: "k8s", Strategies: []StrategyResult{
			{Strategy: "k8s", ResponseRatio: 1, MakespanRatio: 1},
			{Strategy: "finegrain", ResponseRatio: resp, MakespanRatio: mk},
		}}
	}
	got := SummarizeSeeds([]*ScenarioResult{sc("m", 4, 0.8, 0.9), sc("m", 16, 0.5, 0.5), sc("m", 4, 0.6, 1.1)})
	if len(got) != 2 {
		t.Fatalf("%d summaries, want the 4-node group's 2 strategies: %+v", len(got), got)
	}
	f := got[1]
	if f.Strategy != "finegrain" || f.Seeds != 2 || !near(f.ResponseRatio.Mean, 0.7) || f.ResponseRatio.Min != 0.6 ||
		f.ResponseRatio.Max != 0.8 || !near(f.MakespanRatio.Mean, 1) {
		t.Errorf("summary %+v", f)
	}
	var b bytes.Buffer
	if err := WriteMarkdown(&b, &Report{AcrossSeeds: got}); err != nil {
		t.Fatal(err)
	}
	if want := "| finegrain | -30.0 % (-40.0 % … -20.0 %) | +0.0 % (-10.0 % … +10.0 %) |"; !strings.Contains(b.String(), want) {
		t.Errorf("markdown lacks %q:\n%s", want, b.String())
	}
}
