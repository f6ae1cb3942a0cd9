package agentbench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// Main parses the command line with parse and runs run with a text logger on stderr until it
// returns or SIGINT or SIGTERM cancels its context. It exits 2 on bad arguments (the parse error
// printed after name) and 1 when run fails (logged as "<name> failed"); it returns when run
// succeeds.
func Main[O any](name string, parse func([]string, io.Writer) (O, error), run func(context.Context, O, *slog.Logger) error) {
	o, err := parse(os.Args[1:], os.Stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, name+":", err)
		}
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, log); err != nil {
		log.Error(name+" failed", "reason", err.Error())
		stop()
		os.Exit(1)
	}
}

// Target names the cluster and the node agent's DaemonSet a bench works on.
type Target struct {
	Kubeconfig     string
	AgentNamespace string
	AgentDaemonSet string
}

// FlagSet returns a command's flag set, reporting parse errors to stderr and holding
// -kubeconfig, -agent-namespace and -agent-daemonset (defaults: the local cluster's) bound to t.
func (t *Target) FlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&t.Kubeconfig, "kubeconfig", "/var/lib/finegrain-cluster/admin.kubeconfig", "admin kubeconfig of the cluster")
	fs.StringVar(&t.AgentNamespace, "agent-namespace", "finegrain-system", "namespace of the agent's DaemonSet")
	fs.StringVar(&t.AgentDaemonSet, "agent-daemonset", "finegrain-nodeagent", "name of the agent's DaemonSet")
	return fs
}

// ParseModes reads a -modes value: known modes separated by commas, kept in their order.
func ParseModes[M ~string](list string, known ...M) ([]M, error) {
	var out []M
	for _, m := range strings.Split(list, ",") {
		if !slices.Contains(known, M(m)) {
			want := make([]string, len(known))
			for i, k := range known {
				want[i] = string(k)
			}
			return nil, fmt.Errorf("-modes: unknown mode %q (want %s)", m, strings.Join(want, ", "))
		}
		out = append(out, M(m))
	}
	return out, nil
}

// Session is one bench run's hold on the cluster: a client, a namespace of its own for its
// workers, and the agent's DaemonSet with the arguments it was found with.
type Session struct {
	Client kubernetes.Interface
	// Namespace is "<prefix>-<Unix time>", created by Open and deleted by Close.
	Namespace string
	Agent     DaemonSet
	// AgentArgs are the agent container's arguments when the run began; Close restores them.
	AgentArgs []string
	log       *slog.Logger
}

// Open connects to the cluster, creates the run's namespace and reads the agent's arguments.
func Open(ctx context.Context, t Target, prefix string, log *slog.Logger) (*Session, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", t.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", t.Kubeconfig, err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", t.Kubeconfig, err)
	}
	return open(ctx, client, t, fmt.Sprintf("%s-%d", prefix, time.Now().Unix()), log)
}

func open(ctx context.Context, client kubernetes.Interface, t Target, ns string, log *slog.Logger) (*Session, error) {
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create namespace %s: %w", ns, err)
	}
	s := &Session{Client: client, Namespace: ns, Agent: DaemonSet{Client: client, Namespace: t.AgentNamespace, Name: t.AgentDaemonSet}, log: log}
	args, err := s.Agent.Args(ctx)
	if err != nil {
		s.deleteNamespace()
		return nil, err
	}
	s.AgentArgs = args
	return s, nil
}

// Close rolls the agent back out with the arguments it was found with (logging when it cannot)
// and deletes the run's namespace. It does not depend on the run's context, which may have ended.
func (s *Session) Close() {
	if _, err := s.Agent.SetArgs(context.Background(), s.AgentArgs); err != nil {
		s.log.Error("cannot restore the agent's arguments", "args", s.AgentArgs, "reason", err.Error())
	}
	s.deleteNamespace()
}

func (s *Session) deleteNamespace() {
	_ = s.Client.CoreV1().Namespaces().Delete(context.Background(), s.Namespace, metav1.DeleteOptions{})
}

// WriteJSON writes v, indented, to path; an empty path writes nothing.
func WriteJSON(path string, v any) error {
	if path == "" {
		return nil
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write the results: %w", err)
	}
	return nil
}

// Poll calls f every 100 ms until it returns nil, ctx ends or limit passes; the error then names
// what was awaited and wraps f's last error.
func Poll(ctx context.Context, what string, limit time.Duration, f func() error) error {
	deadline := time.Now().Add(limit)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %s: %w", what, limit, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
