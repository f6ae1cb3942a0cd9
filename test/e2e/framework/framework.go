// Package framework is the toolkit of finegrain's end-to-end suite (test/e2e, build tag e2e) for
// the local cluster that hack/cluster/up.sh brings up: clients from its admin kubeconfig,
// throw-away namespaces, pods with the local cluster's defaults (hostNetwork, local images,
// in-cluster API address), waits that poll against a deadline, container cgroup paths, and a dump
// of pods, events, agent logs and cgroup files when a test fails. It only creates and deletes
// objects in the namespaces it makes, unless a helper says otherwise; production code must not
// import it.
package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Images hack/images/build.sh builds and hack/cluster/up.sh imports.
const (
	// PauseImage runs the pods' sandboxes.
	PauseImage = "localhost/finegrain-pause:dev"
	// WorkerImage idles by default (pause) and holds podlister and fgworker (bench/worker).
	WorkerImage = "localhost/finegrain-worker:dev"
	// FinegrainImage holds every command under cmd/ in /usr/local/bin.
	FinegrainImage = "localhost/finegrain:dev"
	// MPIImage runs sshd as a worker and the given command as a launcher, with Open MPI, MPICH
	// and HPCC (images/mpi).
	MPIImage = "localhost/finegrain-mpi:dev"
)

// SystemNamespace is where daemonset/ deploys finegrain (the node agent, the placer); the failure
// dump includes the logs of every pod in it.
const SystemNamespace = "finegrain-system"

// DefaultClusterDir is where hack/cluster/up.sh keeps the cluster (FINEGRAIN_CLUSTER_DIR
// overrides it, for both).
const DefaultClusterDir = "/var/lib/finegrain-cluster"

// Cluster is the local cluster as the tests see it.
type Cluster struct {
	Config  *rest.Config
	Client  kubernetes.Interface
	Dynamic dynamic.Interface

	// NodeName is the cluster's only node, or the first of several.
	NodeName string
	// Nodes are all the cluster's nodes (one unless up.sh ran with NODES=2..9).
	Nodes []Node
	// Overlay is the kustomization that deploys daemonset/ on this cluster (hack/cluster/overlay,
	// or hack/cluster/overlay-nodes on several nodes), relative to the checkout.
	Overlay string
	// Dir holds the cluster's state; LogDir the daemons' logs (kubelet.log, ...).
	Dir, LogDir string
	// Kubeconfig is the admin kubeconfig; KubectlPath the kubectl built with the cluster.
	Kubeconfig, KubectlPath string
	// KubeletRoot is the (first node's) kubelet's --root-dir (cpu_manager_state, pods/).
	KubeletRoot string
	// KubeletURL is the (first node's) kubelet's own HTTPS endpoint (see KubeletGet).
	KubeletURL string
	// CPUManagerPolicy and ReservedCPUs are what up.sh started the kubelet with.
	CPUManagerPolicy, ReservedCPUs string
	// RepoRoot is the root of the finegrain checkout the tests run from.
	RepoRoot string
	// Env is everything up.sh recorded in cluster.env (CONTAINERD, CONTAINERD_SOCK, NRI_SOCK, ...).
	Env map[string]string
}

var (
	setupOnce sync.Once
	shared    *Cluster
	setupErr  error
)

// Setup returns the local cluster, connecting on first use. It fails the test with what to do
// when no cluster is up: the e2e build tag means a cluster is expected.
func Setup(t testing.TB) *Cluster {
	t.Helper()
	setupOnce.Do(func() { shared, setupErr = connect() })
	if setupErr != nil {
		t.Fatalf("local cluster: %v (bring it up with make cluster-up, or run make e2e)", setupErr)
	}
	return shared
}

func connect() (*Cluster, error) {
	dir := os.Getenv("FINEGRAIN_CLUSTER_DIR")
	if dir == "" {
		dir = DefaultClusterDir
	}
	envPath := filepath.Join(dir, "cluster.env")
	data, err := os.ReadFile(envPath)
	if err != nil {
		return nil, fmt.Errorf("read cluster settings: %w", err)
	}
	env, err := ParseEnv(string(data))
	if err != nil {
		return nil, fmt.Errorf("cluster settings %s: %w", envPath, err)
	}
	c := &Cluster{
		Dir:              dir,
		NodeName:         env["NODE_NAME"],
		LogDir:           env["LOG_DIR"],
		Kubeconfig:       env["KUBECONFIG"],
		KubectlPath:      env["KUBECTL"],
		KubeletRoot:      env["KUBELET_ROOT"],
		KubeletURL:       env["KUBELET_URL"],
		CPUManagerPolicy: env["KUBELET_CPU_POLICY"],
		ReservedCPUs:     env["KUBELET_RESERVED_CPUS"],
		Overlay:          env["OVERLAY"],
		Env:              env,
	}
	if c.Overlay == "" {
		c.Overlay = "hack/cluster/overlay"
	}
	if c.Nodes, err = nodesFromEnv(env); err != nil {
		return nil, fmt.Errorf("cluster settings %s: %w", envPath, err)
	}
	for key, val := range map[string]string{"NODE_NAME": c.NodeName, "LOG_DIR": c.LogDir, "KUBECONFIG": c.Kubeconfig, "KUBECTL": c.KubectlPath, "KUBELET_ROOT": c.KubeletRoot, "KUBELET_URL": c.KubeletURL, "KUBELET_CPU_POLICY": c.CPUManagerPolicy} {
		if val == "" {
			return nil, fmt.Errorf("cluster settings %s lack %s; bring the cluster up again with make cluster-up", envPath, key)
		}
	}
	if c.RepoRoot, err = repoRoot(); err != nil {
		return nil, err
	}
	c.Config, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %s: %w", c.Kubeconfig, err)
	}
	c.Config.QPS, c.Config.Burst = 50, 100
	if c.Client, err = kubernetes.NewForConfig(c.Config); err != nil {
		return nil, fmt.Errorf("client for %s: %w", c.Config.Host, err)
	}
	if c.Dynamic, err = dynamic.NewForConfig(c.Config); err != nil {
		return nil, fmt.Errorf("dynamic client for %s: %w", c.Config.Host, err)
	}
	return c, nil
}

// ParseEnv reads the KEY=VALUE lines of cluster.env; blank lines and lines starting with # are
// skipped. Values are taken verbatim (no quotes, no expansion).
func ParseEnv(data string) (map[string]string, error) {
	env := map[string]string{}
	for i, line := range strings.Split(data, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, val, ok := strings.Cut(line, "=")
		if !ok || !validKey(key) {
			return nil, fmt.Errorf("line %d %q is not KEY=VALUE with KEY made of A-Z, 0-9 and _", i+1, line)
		}
		if _, dup := env[key]; dup {
			return nil, fmt.Errorf("line %d sets %s a second time", i+1, key)
		}
		env[key] = val
	}
	return env, nil
}

func validKey(key string) bool {
	if key == "" || (key[0] >= '0' && key[0] <= '9') {
		return false
	}
	for _, r := range key {
		if (r < 'A' || r > 'Z') && (r < '0' || r > '9') && r != '_' {
			return false
		}
	}
	return true
}

// repoRoot finds the checkout's root from the working directory (go test runs in the package's
// directory).
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		data, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && strings.HasPrefix(string(data), "module github.com/finegrain-dev/finegrain\n") {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no finegrain checkout above %s", dir)
		}
	}
}

// RepoPath returns a path inside the checkout, e.g. RepoPath("daemonset").
func (c *Cluster) RepoPath(rel string) string { return filepath.Join(c.RepoRoot, rel) }
