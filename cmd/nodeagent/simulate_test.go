package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

func fixtureRoot(name string) string {
	return filepath.Join("..", "..", "pkg", "topology", "testdata", name, "sys")
}

func simulateCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return nodeagent(append([]string{"simulate"}, args...)...)
}

// TestSimulateContract pins the JSON shape other tools parse.
func TestSimulateContract(t *testing.T) {
	code, out, errOut := simulateCmd(t, "--sysfs-root", fixtureRoot("xeon-e5-2697v4-2s"),
		"--request", "4", "--request", "8@1", "--release", "0", "--request", "19", "--release", "1", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got simReport
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	if !strings.Contains(got.Steps[3].Error, "can never fit: any single NUMA node of this machine can give at most 18") {
		t.Errorf("step 3 error = %q", got.Steps[3].Error)
	}
	got.Steps[3].Error = "E"
	b, _ := json.Marshal(got)
	want := `{"steps":[{"request":4,"cpus":"0-3","mems":"0","numaNode":0},{"request":8,"cpus":"18-25","mems":"1","numaNode":1},` +
		`{"release":0},{"request":19,"error":"E"},{"release":1}],"free":[{"numaNode":0,"cpus":"0-17"},{"numaNode":1,"cpus":"18-35"}],"shared":"0-35"}`
	if string(b) != want {
		t.Errorf("report\n got %s\nwant %s", b, want)
	}
}

func TestSimulateReservedAndNoFit(t *testing.T) {
	// Xeon Gold 6248: 2 × 20 SMT cores; node 0 is CPUs 0-19,40-59.
	code, out, errOut := simulateCmd(t, "--sysfs-root", fixtureRoot("xeon-gold-6248-2s-smt"), "--reserved-cpus", "0,40",
		"--request", "36@0", "--request", "4@0", "--request", "3", "--request", "40", "--request", "2", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got simReport
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	wantErrs := []string{
		"",
		"NUMA node 0 does not have 4 CPUs in free whole cores; free now: node 0: 2 free CPUs [19,59], 1 whole cores free",
		"not a multiple of the 2 hardware threads per core",
		"",
		"does not fit now: it would shrink the shared pool from 2 CPUs below its minimum of 1",
	}
	for i, want := range wantErrs {
		if (want == "") != (got.Steps[i].Error == "") || !strings.Contains(got.Steps[i].Error, want) {
			t.Errorf("step %d error = %q, want %q", i, got.Steps[i].Error, want)
		}
	}
	if got.Steps[0].CPUs != "1-18,41-58" || got.Steps[3].CPUs != "20-39,60-79" || got.Shared != "19,59" {
		t.Errorf("report = %s", out)
	}
}

func TestSimulateTableAndSplitCores(t *testing.T) {
	code, out, errOut := simulateCmd(t, "--sysfs-root", fixtureRoot("xeon-gold-6248-2s-smt"), "--allow-split-cores",
		"--request", "3", "--request", "1", "--release", "0", "--release", "0", "-o", "table")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"0     request 3  cpus 0-1,40 mems 0 (NUMA node 0)",
		"1     request 1  cpus 41 mems 0 (NUMA node 0)",
		"2     release 0  released",
		"3     release 0  error: request 0 was already released",
		"0          0-19,40,42-59",
		"SHARED  0-40,42-79",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestSimulateReleaseOfRefusedRequest(t *testing.T) {
	code, out, _ := simulateCmd(t, "--sysfs-root", fixtureRoot("vm-kvm-epyc-2cpu"), "--request", "2", "--release", "0", "-o", "json")
	var got simReport
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || len(got.Steps) != 2 ||
		got.Steps[1].Error != "request 0 was not granted; there is nothing to release" {
		t.Errorf("exit %d, output %s", code, out)
	}
}

func TestSimulateBadInput(t *testing.T) {
	root := fixtureRoot("xeon-e5-2697v4-2s")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--request", "x"}, 2, `request "x": "x" is not a number of CPUs`},
		{[]string{"--request", "4@-1"}, 2, `"-1" is not a NUMA node number`},
		{[]string{"--release", "0"}, 2, "release 0 names a request that does not come before it"},
		{[]string{"--request", "1", "--release", "one"}, 2, `"one" is not a request index`},
		{[]string{"--request", "1", "-o", "yaml"}, 2, `"yaml" is not an output format`},
		{[]string{"--request", "1", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"--sysfs-root", root, "--reserved-cpus", "0-", "--request", "1"}, 1, "--reserved-cpus"},
		{[]string{"--sysfs-root", root, "--min-shared-cpus", "0"}, 1, "minimum shared pool of 0 CPUs is too small"},
		{[]string{"--sysfs-root", t.TempDir()}, 1, "discover the machine under"},
	} {
		code, out, errOut := simulateCmd(t, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) || out != "" {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want exit %d and %q", tc.args, code, errOut, out, tc.code, tc.want)
		}
	}
	// A request of zero or a negative count is a step error, like any refused request.
	code, out, _ := simulateCmd(t, "--sysfs-root", root, "--request", "0", "--request", "-3", "-o", "json")
	if code != 0 || !strings.Contains(out, "asks for 0 CPUs") || !strings.Contains(out, "asks for -3 CPUs") {
		t.Errorf("zero and negative requests: exit %d, output %s", code, out)
	}
}
