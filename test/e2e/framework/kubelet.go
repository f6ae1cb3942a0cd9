package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

// KubeletConfig is the part of the running kubelet's configuration the tests look at.
type KubeletConfig struct {
	CPUManagerPolicy   string `json:"cpuManagerPolicy"`
	ReservedSystemCPUs string `json:"reservedSystemCPUs"`
	CgroupDriver       string `json:"cgroupDriver"`
}

// KubeletGet fetches a path of the kubelet's HTTPS endpoint (/configz, /pods, /metrics, ...)
// with the admin credentials. The API server's node proxy cannot be used: it refuses to dial
// loopback addresses, and the node's address is 127.0.0.1.
func (c *Cluster) KubeletGet(ctx context.Context, path string) ([]byte, error) {
	tlsConfig, err := rest.TLSConfigFor(c.Config)
	if err != nil {
		return nil, fmt.Errorf("TLS configuration for the kubelet: %w", err)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.KubeletURL+path, nil)
	if err != nil {
		return nil, fmt.Errorf("request for the kubelet's %s: %w", path, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("kubelet %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("kubelet %s: read the answer: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("kubelet %s answered %s: %s", path, resp.Status, strings.TrimSpace(string(body)))
	}
	return body, nil
}

// KubeletConfig asks the running kubelet for its configuration (its /configz endpoint).
func (c *Cluster) KubeletConfig(ctx context.Context) (KubeletConfig, error) {
	data, err := c.KubeletGet(ctx, "/configz")
	if err != nil {
		return KubeletConfig{}, fmt.Errorf("configuration of the kubelet on node %s: %w", c.NodeName, err)
	}
	var body struct {
		Config *KubeletConfig `json:"kubeletconfig"`
	}
	if err := json.Unmarshal(data, &body); err != nil || body.Config == nil {
		return KubeletConfig{}, fmt.Errorf("configz of the kubelet on node %s is not {\"kubeletconfig\": {...}}: %v", c.NodeName, err)
	}
	return *body.Config, nil
}

// RequireCPUManagerPolicy skips the test unless the kubelet runs the given CPU manager policy
// (make e2e runs the suite once with each).
func (c *Cluster) RequireCPUManagerPolicy(t testing.TB, policy string) {
	t.Helper()
	cfg, err := c.KubeletConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CPUManagerPolicy != policy {
		t.Skipf("needs the kubelet's cpu-manager-policy %s; it runs %s (make e2e runs the suite with none and with static)", policy, cfg.CPUManagerPolicy)
	}
}

// Kubectl runs the cluster's kubectl with the admin kubeconfig and returns its standard output;
// on failure the error holds standard error.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, c.KubectlPath, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// ApplyKustomize runs kubectl apply -k on a directory of the checkout (e.g. "hack/cluster/overlay",
// the local overlay of daemonset/). What it creates stays until the cluster goes down: the
// DaemonSet and the placer are shared by the tests that need them.
func (c *Cluster) ApplyKustomize(t testing.TB, dir string) {
	t.Helper()
	if out, err := c.Kubectl(context.Background(), "apply", "-k", c.RepoPath(dir)); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}
