// Package kubeletpolicy owns detecting a kubelet whose CPU manager pins containers itself (the
// static policy), which the node agent must never fight: both would rewrite the same cpusets. It
// reads the kubelet's CPU manager checkpoint (cpu_manager_state in the kubelet's root directory),
// which a kubelet running the static policy keeps up to date. It must not write anything and it
// needs no API-server access (the kubelet's configz would need the broad nodes/proxy right).
package kubeletpolicy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// StateFile is the CPU manager checkpoint's name in the kubelet's root directory.
const StateFile = "cpu_manager_state"

// maxStateSize bounds the file read; the kubelet's checkpoint of a large node is a few kilobytes.
const maxStateSize = 1 << 20

// Policies the kubelet's CPU manager writes into its checkpoint.
const (
	PolicyNone   = "none"
	PolicyStatic = "static"
)

// Result is what the kubelet's checkpoint says.
type Result struct {
	// Path is the checkpoint's path.
	Path string
	// Policy is the CPU manager policy it names; empty when there is no checkpoint (a kubelet
	// that never ran here, or one older than the CPU manager).
	Policy string
}

// Static reports whether the kubelet pins containers itself.
func (r Result) Static() bool { return r.Policy != "" && r.Policy != PolicyNone }

// Check reads the CPU manager checkpoint below the kubelet's root directory.
func Check(kubeletRootDir string) (Result, error) {
	path := filepath.Join(kubeletRootDir, StateFile)
	res := Result{Path: path}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("kubelet CPU manager state %s: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxStateSize+1))
	if err != nil {
		return res, fmt.Errorf("kubelet CPU manager state %s: %w", path, err)
	}
	if res.Policy, err = Parse(data); err != nil {
		return res, fmt.Errorf("kubelet CPU manager state %s: %w", path, err)
	}
	return res, nil
}

// Parse returns the policy name of a CPU manager checkpoint.
func Parse(data []byte) (string, error) {
	if len(data) > maxStateSize {
		return "", fmt.Errorf("larger than %d bytes: not a CPU manager checkpoint", maxStateSize)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return "", fmt.Errorf("empty file: not a CPU manager checkpoint")
	}
	var st struct {
		PolicyName *string `json:"policyName"`
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return "", fmt.Errorf("not a CPU manager checkpoint: %w", err)
	}
	if st.PolicyName == nil || *st.PolicyName == "" {
		return "", fmt.Errorf("no policyName field: not a CPU manager checkpoint")
	}
	return *st.PolicyName, nil
}
