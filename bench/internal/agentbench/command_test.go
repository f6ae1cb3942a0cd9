package agentbench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

type testMode string

func TestParseModes(t *testing.T) {
	got, err := ParseModes("b,a,b", testMode("a"), testMode("b"))
	if err != nil || !slices.Equal(got, []testMode{"b", "a", "b"}) {
		t.Errorf("ParseModes(b,a,b) = %q, %v", got, err)
	}
	for _, list := range []string{"a,c", "", "a,"} {
		_, err := ParseModes(list, testMode("a"), testMode("b"))
		if err == nil || !strings.Contains(err.Error(), "(want a, b)") {
			t.Errorf("ParseModes(%q) = %v, want an error listing the known modes", list, err)
		}
	}
}

func TestFlagSet(t *testing.T) {
	var tg Target
	var stderr strings.Builder
	fs := tg.FlagSet("demo", &stderr)
	if err := fs.Parse([]string{"-agent-namespace", "ns"}); err != nil {
		t.Fatal(err)
	}
	want := Target{Kubeconfig: "/var/lib/finegrain-cluster/admin.kubeconfig", AgentNamespace: "ns", AgentDaemonSet: "finegrain-nodeagent"}
	if tg != want {
		t.Errorf("target %+v, want %+v", tg, want)
	}
	if err := fs.Parse([]string{"-no-such-flag"}); err == nil || !strings.Contains(stderr.String(), "Usage of demo") {
		t.Errorf("a bad flag: %v, stderr %q; want an error and the usage on stderr", err, stderr.String())
	}
}

// Open's session holds the run's namespace and the agent's arguments; Close rolls the agent back
// out with them and deletes the namespace.
func TestSessionRestores(t *testing.T) {
	kube := newCluster(t, "--nri=auto")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	done := controller(ctx, t, kube)
	defer func() { cancel(); <-done }()
	s, err := open(ctx, kube, Target{AgentNamespace: agentNS, AgentDaemonSet: agentName}, "bench-1", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Namespaces().Get(ctx, "bench-1", metav1.GetOptions{}); err != nil || s.Namespace != "bench-1" || !slices.Equal(s.AgentArgs, []string{"--nri=auto"}) {
		t.Fatalf("session %+v, namespace: %v", s, err)
	}
	if _, err := s.Agent.SetArgs(ctx, []string{"--nri=on"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if got, err := s.Agent.Args(ctx); err != nil || !slices.Equal(got, []string{"--nri=auto"}) {
		t.Errorf("agent args after Close = %q, %v; want the ones found", got, err)
	}
	if _, err := kube.CoreV1().Namespaces().Get(ctx, "bench-1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace after Close: %v, want it deleted", err)
	}
}

// Without the agent's DaemonSet no session opens and the namespace it created is deleted again.
func TestOpenWithoutAgent(t *testing.T) {
	kube := fake.NewClientset()
	_, err := open(context.Background(), kube, Target{AgentNamespace: agentNS, AgentDaemonSet: agentName}, "bench-1", slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "agent DaemonSet fg-system/fg-agent") {
		t.Errorf("open = %v, want an error naming the DaemonSet", err)
	}
	if _, err := kube.CoreV1().Namespaces().Get(context.Background(), "bench-1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace after a failed open: %v, want it deleted", err)
	}
}

func TestOpenBadKubeconfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "none.kubeconfig")
	_, err := Open(context.Background(), Target{Kubeconfig: path}, "bench", slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "kubeconfig "+path) {
		t.Errorf("Open with a missing kubeconfig = %v, want an error naming it", err)
	}
}

func TestWriteJSON(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.json")
	if err := WriteJSON(path, map[string]time.Duration{"p50Ns": 1500}); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(path); err != nil || string(data) != "{\n  \"p50Ns\": 1500\n}\n" {
		t.Errorf("file %q, %v", data, err)
	}
	if err := WriteJSON("", 1); err != nil {
		t.Errorf("WriteJSON without a path = %v", err)
	}
	if err := WriteJSON(dir, 1); err == nil {
		t.Error("WriteJSON onto a directory succeeded")
	}
	if err := WriteJSON(path, func() {}); err == nil {
		t.Error("WriteJSON of a function succeeded")
	}
}

func TestPoll(t *testing.T) {
	calls := 0
	err := Poll(context.Background(), "three calls", time.Minute, func() error {
		if calls++; calls < 3 {
			return fmt.Errorf("call %d", calls)
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Errorf("Poll = %v after %d calls, want success on the third", err, calls)
	}
	last := errors.New("still not")
	err = Poll(context.Background(), "the impossible", 0, func() error { return last })
	if !errors.Is(err, last) || !strings.Contains(err.Error(), "the impossible: not within 0s") {
		t.Errorf("Poll past its limit = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Poll(ctx, "x", time.Minute, func() error { return last }); !errors.Is(err, context.Canceled) {
		t.Errorf("Poll with an ended context = %v", err)
	}
}

// mainEnv selects, in a child of the test binary, which command TestMainExits runs through Main.
const mainEnv = "AGENTBENCH_TEST_MAIN"

func TestMainExits(t *testing.T) {
	if v := os.Getenv(mainEnv); v != "" {
		Main("demo", func(_ []string, _ io.Writer) (string, error) {
			switch v {
			case "bad-args":
				return "", errors.New("no such flag -x")
			case "help":
				return "", flag.ErrHelp
			}
			return v, nil
		}, func(ctx context.Context, o string, _ *slog.Logger) error {
			if o == "fail" {
				return errors.New("the cluster is gone")
			}
			return ctx.Err()
		})
		return
	}
	for _, c := range []struct {
		mode, stderr string
		code         int
	}{
		{"ok", "", 0},
		{"bad-args", "demo: no such flag -x", 2},
		{"help", "", 2},
		{"fail", `msg="demo failed" reason="the cluster is gone"`, 1},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMainExits$")
		cmd.Env = append(os.Environ(), mainEnv+"="+c.mode)
		out, err := cmd.CombinedOutput()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != c.code || !strings.Contains(string(out), c.stderr) || c.mode == "help" && strings.Contains(string(out), "demo") {
			t.Errorf("%s: exit %d, output %q; want exit %d and %q", c.mode, code, out, c.code, c.stderr)
		}
	}
}
