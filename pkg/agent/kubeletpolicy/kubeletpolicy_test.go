package kubeletpolicy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The files below are what kubelet 1.33 writes with each policy.
const (
	staticState = `{"policyName":"static","defaultCpuSet":"0,2-3","entries":{"5c2b7a1e-0f3c-4d1a-9f5e-0a1b2c3d4e5f":{"rank":"1"}},"checksum":1384521931}`
	noneState   = `{"policyName":"none","defaultCpuSet":"","checksum":1353318690}`
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		write         bool
		wantPolicy    string
		wantStatic    bool
		wantErr       string
	}{
		{name: "absent", wantPolicy: ""},
		{name: "none", write: true, content: noneState, wantPolicy: "none"},
		{name: "static", write: true, content: staticState, wantPolicy: "static", wantStatic: true},
		{name: "empty", write: true, content: "", wantErr: "empty"},
		{name: "garbage", write: true, content: "{not json", wantErr: "not a CPU manager checkpoint"},
		{name: "no policy", write: true, content: `{"defaultCpuSet":"0"}`, wantErr: "no policyName"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.write {
				if err := os.WriteFile(filepath.Join(dir, StateFile), []byte(tc.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			got, err := Check(dir)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), dir) {
					t.Fatalf("Check = %+v, %v; want an error naming the file and %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got.Policy != tc.wantPolicy || got.Static() != tc.wantStatic {
				t.Fatalf("Check = %+v (static %v), %v; want policy %q static %v", got, got.Static(), err, tc.wantPolicy, tc.wantStatic)
			}
		})
	}
}

func TestCheckTooLarge(t *testing.T) {
	dir := t.TempDir()
	big := `{"policyName":"static","x":"` + strings.Repeat("a", maxStateSize) + `"}`
	if err := os.WriteFile(filepath.Join(dir, StateFile), []byte(big), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Check(dir); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("Check(huge file) = %v, want a size error", err)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{staticState, noneState, "", "{}", `{"policyName":""}`, `{"policyName":7}`, "null"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse(data)
		if err == nil && p == "" {
			t.Fatalf("Parse(%q) = empty policy without error", data)
		}
	})
}
