//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	st "github.com/finegrain-dev/finegrain/pkg/placer/snapshot/snapshottest"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
	"github.com/finegrain-dev/finegrain/test/e2e/framework"
)

// The processes the chaos test kills: a placer it runs on the host (as make bench-placer-scale
// does), kwok playing the kubelets of fake nodes, and the cluster's kube-apiserver.

// Names that mark the chaos test's fake nodes; only objects carrying them are deleted.
const (
	chaosLabel = "finegrain.dev/e2e"
	chaosValue = "chaos"
	kwokKey    = "kwok.x-k8s.io/node"
	kwokValue  = "fake"
)

// kwokToleration lets pods onto the fake nodes.
var kwokToleration = corev1.Toleration{Key: kwokKey, Operator: corev1.TolerationOpEqual, Value: kwokValue, Effect: corev1.TaintEffectNoSchedule}

// process is a program the test started and may kill.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	// done is closed once the process has ended, err then holding how.
	done chan struct{}
	err  error
}

// startProcess runs bin with args, its output appended to dir/name.log, which the failure dump
// shows (once, however often the program is started again).
func startProcess(t *testing.T, c *framework.Cluster, dir, name, bin string, args ...string) *process {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	_, statErr := os.Stat(logPath)
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	// It goes with the test binary, even one killed before its clean-ups ran.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	f.Close()
	p := &process{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	if errors.Is(statErr, fs.ErrNotExist) {
		c.OnFailure(t, name+" log (end)", func(_ context.Context, w io.Writer) error {
			return tail(w, logPath, 16<<10)
		})
	}
	return p
}

// tail writes the last n bytes of a file to w.
func tail(w io.Writer, path string, n int) error {
	data, err := os.ReadFile(path)
	if len(data) > n {
		data = data[len(data)-n:]
	}
	_, werr := w.Write(data)
	return errors.Join(err, werr)
}

// kill sends SIGKILL, as a crash would, and waits until the process is gone.
func (p *process) kill(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s (PID %d) did not exit after SIGKILL", p.name, p.cmd.Process.Pid)
	}
}

// stop ends the process gently, then for good.
func (p *process) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// placerKubeconfig writes dir/placer.kubeconfig: the cluster's address with a token of the
// placer's service account (daemonset/placer/rbac.yaml, applied here), so that the placer the
// test runs on the host has the deployment's rights, no more, and the admission policy of
// daemonset/policy/placer-pods.yaml lets it set its NUMA hints and bind pods in its name, as it
// lets no one else.
func placerKubeconfig(t *testing.T, c *framework.Cluster, dir string) string {
	t.Helper()
	ctx := context.Background()
	if out, err := c.Kubectl(ctx, "apply", "-f", c.RepoPath("daemonset/namespace.yaml"), "-f", c.RepoPath("daemonset/placer/rbac.yaml"),
		"-f", c.RepoPath("daemonset/policy/placer-pods.yaml")); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	tr, err := c.Client.CoreV1().ServiceAccounts(framework.SystemNamespace).CreateToken(ctx, "finegrain-placer",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("request a token of service account %s/finegrain-placer: %v", framework.SystemNamespace, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: c.Config.Host, CertificateAuthority: c.Config.CAFile, CertificateAuthorityData: c.Config.CAData}
	cfg.AuthInfos["finegrain-placer"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["finegrain-placer"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "finegrain-placer"}
	cfg.CurrentContext = "finegrain-placer"
	path := filepath.Join(dir, "placer.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// buildPlacer builds cmd/placer from the checkout into dir.
func buildPlacer(t *testing.T, c *framework.Cluster, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "placer")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/placer")
	cmd.Dir, cmd.Env = c.RepoRoot, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the placer: %v\n%s", err, out)
	}
	return bin
}

// kwokBinary is kwok as make bench-placer-scale installs it ($FINEGRAIN_KWOK overrides it).
func kwokBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("FINEGRAIN_KWOK")
	if bin == "" {
		home, _ := os.UserHomeDir()
		bin = filepath.Join(home, ".cache/finegrain/kwok/v0.7.0/kwok")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("kwok is not installed at %s (make bench-placer-scale installs it, or set FINEGRAIN_KWOK)", bin)
	}
	return bin
}

// startKwok runs kwok for the nodes annotated kwokKey=kwokValue: it keeps them Ready, and a pod
// bound to one becomes Running and Ready (a Stage of ours, which replaces kwok's default pod
// stages). kwok's default stages also finish a deletion, and kwok deletes by name, without the
// UID precondition a kubelet gives its delete: lagging behind the placer (as it does after the
// API server's restart), it deleted a rolled-back worker's successor of the same name, and a
// whole gang failed. The chaos gangs' pods have a grace period of 0, so the API server removes
// them at once and there is no deletion for a kubelet to finish.
func startKwok(t *testing.T, c *framework.Cluster, dir, bin string) *process {
	t.Helper()
	cfg := filepath.Join(dir, "kwok.yaml")
	conf := `apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  manageNodesWithAnnotationSelector: ` + kwokKey + "=" + kwokValue + `
  cidr: 10.224.0.0/12
  nodeLeaseDurationSeconds: 40
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: chaos-pod-running
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: .metadata.deletionTimestamp
      operator: DoesNotExist
    - key: .status.phase
      operator: NotIn
      values: [Running]
  next:
    statusTemplate: |
      phase: Running
      conditions:
      - type: Ready
        status: "True"
      - type: ContainersReady
        status: "True"
`
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return startProcess(t, c, dir, "kwok", bin, "--kubeconfig", c.Kubeconfig, "--config", cfg)
}

// fakeNodeName is fake node i.
func fakeNodeName(i int) string { return fmt.Sprintf("chaos-%03d", i) }

// addFakeNodes makes n fake nodes of numa NUMA nodes of cpus CPUs, each with the free-core map an
// agent with nothing pinned would publish, and removes them (their maps and Leases too) when the
// test ends.
func addFakeNodes(t *testing.T, c *framework.Cluster, n, numa, cpus int) {
	t.Helper()
	ctx := context.Background()
	t.Cleanup(func() { removeFakeNodes(t, c) })
	taint := corev1.Taint{Key: kwokKey, Value: kwokValue, Effect: corev1.TaintEffectNoSchedule}
	for i := range n {
		name := fakeNodeName(i)
		node := st.Node(name, numa*cpus, fmt.Sprintf("%dGi", numa*cpus*4),
			map[string]string{chaosLabel: chaosValue, "type": "kwok", corev1.LabelHostname: name}, taint)
		node.Annotations = map[string]string{kwokKey: kwokValue, "node.alpha.kubernetes.io/ttl": "0"}
		if _, err := c.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create fake node %s: %v", node.Name, err)
		}
		zones := make([]st.Zone, numa)
		for z := range zones {
			zones[z] = st.Zone{Free: fmt.Sprintf("%d-%d", z*cpus, (z+1)*cpus-1), Available: -1, Memory: fmt.Sprintf("%dGi", cpus*4)}
		}
		u := st.NRT(node.Name, 1, zones...)
		u.SetLabels(map[string]string{chaosLabel: chaosValue})
		if _, err := c.Dynamic.Resource(nrt.GroupVersionResource).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create the free-core map of %s: %v", node.Name, err)
		}
	}
}

// removeFakeNodes deletes the fake nodes, their maps and the Leases kwok renewed for them.
func removeFakeNodes(t *testing.T, c *framework.Cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sel := metav1.ListOptions{LabelSelector: chaosLabel + "=" + chaosValue}
	if err := c.Dynamic.Resource(nrt.GroupVersionResource).DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete the fake nodes' maps: %v", err)
	}
	if err := c.Client.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil {
		t.Errorf("delete the fake nodes: %v", err)
	}
	leases := c.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	framework.Eventually(t, "the fake nodes and their Leases gone", 2*time.Minute, func(ctx context.Context) error {
		nodes, err := c.Client.CoreV1().Nodes().List(ctx, sel)
		if err != nil {
			return err
		}
		list, err := leases.List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		left := len(nodes.Items)
		for _, l := range list.Items {
			if strings.HasPrefix(l.Name, "chaos-") {
				left++
				_ = leases.Delete(ctx, l.Name, metav1.DeleteOptions{})
			}
		}
		if left > 0 {
			return fmt.Errorf("%d nodes and Leases left", left)
		}
		return nil
	})
}
