package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

const testdata = "../../pkg/placer/dryrun/testdata/"

func TestPlanCommand(t *testing.T) {
	tests := []struct {
		args   []string
		rc     int
		stdout string
		stderr string
		isJSON bool
	}{
		{[]string{"plan", "--job", testdata + "job-cpu-scale.yaml", "--cluster", testdata + "cluster-paper.yaml", "-o", "json"}, 0, `"worker": "lulesh-worker-0"`, "", true},
		{[]string{"plan", "--job", testdata + "job-none.yaml", "--cluster", testdata + "cluster-fragmented.yaml"}, 1, `"reason": "numa"`, "", true},
		{[]string{"plan", "--job", testdata + "job-network.yaml", "--cluster", testdata + "cluster-stale.yaml", "-o", "text"}, 0, "lulesh-worker-0                      16      0 n2                       1", "", false},
		{[]string{"plan", "--cluster", testdata + "cluster-paper.yaml"}, 1, `"error": "give exactly one of --job FILE and --pod-group NAMESPACE/NAME"`, "", true},
		{[]string{"plan", "--job", "x", "-o", "yaml"}, 2, "", `-o "yaml": want json or text`, false},
		{[]string{"plan", "--bogus"}, 2, "", "flag provided but not defined: -bogus", false},
		{[]string{"schedule"}, 2, "", `unknown command "schedule"`, false},
		{[]string{"run", "extra"}, 2, "", `run takes no arguments`, false},
		{[]string{"run", "--kubeconfig", "/nonexistent", "--metrics-address", ""}, 1, "", `read kubeconfig /nonexistent`, false},
		{[]string{"help"}, 0, "plan", "", false},
		{nil, 2, "", "usage:", false},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if rc := run(tc.args, &stdout, &stderr); rc != tc.rc {
				t.Errorf("exit %d, want %d; stderr %s", rc, tc.rc, stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.stdout) {
				t.Errorf("stdout %s\ndoes not contain %q", stdout.String(), tc.stdout)
			}
			if !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("stderr %s\ndoes not contain %q", stderr.String(), tc.stderr)
			}
			if tc.isJSON && !json.Valid(stdout.Bytes()) {
				t.Errorf("stdout is not JSON: %s", stdout.String())
			}
		})
	}
}
