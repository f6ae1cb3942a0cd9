// Command kubectl-finegrain is a kubectl plugin (`kubectl finegrain ...`) that shows the
// cluster's free-core maps and pins from the NodeResourceTopology objects finegrain's node agents
// publish (`nodes` summarises every node, `node NAME` details one) and where the HPCJobs run
// (`jobs` lists them, `job NAME` shows each worker's node, NUMA node and pinned CPUs and, while
// the job runs, the processes and MPI ranks the node agents read in the workers' cgroups, asked
// through the pods/exec subresource of the agent pods). It takes kubectl's kubeconfig flags
// (--kubeconfig, --context, --namespace, --server, --token, ...). It only reads from the API
// server; its one write is the exec that runs `nodeagent pins --processes` in an agent pod.
// This file parses the command line; nodes.go, node.go, jobs.go and job.go print.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
)

const usage = `usage: kubectl finegrain <command> [flags]

Shows what finegrain's node agents publish in their NodeResourceTopology objects
(topology.node.k8s.io/v1alpha2): per node and NUMA node, the CPUs exclusive requests can still
get, and which container holds which exclusive CPUs; and where finegrain's HPCJobs run.

commands:
  nodes        one line per node: generation, last update, free CPUs and what one exclusive
               request could get per NUMA node, pinned containers
  node NAME    one node in detail: every NUMA node's counts and free CPU list, every pin
  jobs         one line per HPCJob (-n NAMESPACE, or -A for all): phase, workers, nodes, age
  job NAME     one HPCJob: each worker's node, NUMA node and pinned CPUs, and while it runs
               every process in the workers' pinned containers with its PID, MPI rank, allowed
               CPUs and memory nodes, read by the node agent of each worker's node (needs get
               and create on pods/exec in the agents' namespace)

flags:
`

// Defaults of the flags that find the node agent pods: the DaemonSet's namespace, labels and
// container (daemonset/nodeagent/daemonset.yaml).
const (
	defaultAgentNamespace = "finegrain-system"
	defaultAgentSelector  = "app.kubernetes.io/name=finegrain-nodeagent"
	defaultAgentContainer = "nodeagent"
)

// options are the parsed command line.
type options struct {
	command string
	// name is the node of `node` or the job of `job`.
	name          string
	output        string
	timeout       time.Duration
	allNamespaces bool
	// namespace is the one -n or the kubeconfig's context names, set by run.
	namespace      string
	agentNamespace string
	agentSelector  string
	agentContainer string
	config         clientcmd.ClientConfig
	now            func() time.Time
}

// clientFactory makes the dynamic client from the kubeconfig flags.
type clientFactory func(clientcmd.ClientConfig) (dynamic.Interface, error)

// execFactory makes what runs commands in pods from the kubeconfig flags.
type execFactory func(clientcmd.ClientConfig) (podExec, error)

// env is what run takes from the outside world; tests replace it.
type env struct {
	client clientFactory
	exec   execFactory
	now    func() time.Time
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, env{client: newClient, exec: newAPIExec, now: time.Now}))
}

func newClient(cc clientcmd.ClientConfig) (dynamic.Interface, error) {
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.UserAgent = "kubectl-finegrain"
	return dynamic.NewForConfig(cfg)
}

func parse(args []string, stderr io.Writer) (options, error) {
	var opts options
	fs := pflag.NewFlagSet("kubectl-finegrain", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	loading := clientcmd.NewDefaultClientConfigLoadingRules()
	overrides := &clientcmd.ConfigOverrides{}
	fs.StringVar(&loading.ExplicitPath, "kubeconfig", "", "path to the kubeconfig file")
	clientcmd.BindOverrideFlags(overrides, fs, clientcmd.RecommendedConfigOverrideFlags(""))
	fs.StringVarP(&opts.output, "output", "o", "table", "output format: table or json")
	fs.DurationVar(&opts.timeout, "timeout", 30*time.Second, "how long to wait for the API server (and, for job, the node agents)")
	fs.BoolVarP(&opts.allNamespaces, "all-namespaces", "A", false, "jobs: list the HPCJobs of every namespace")
	fs.StringVar(&opts.agentNamespace, "agent-namespace", defaultAgentNamespace, "job: namespace of the node agent pods")
	fs.StringVar(&opts.agentSelector, "agent-selector", defaultAgentSelector, "job: label selector of the node agent pods")
	fs.StringVar(&opts.agentContainer, "agent-container", defaultAgentContainer, "job: container of the node agent pods")
	if err := fs.Parse(args); err != nil {
		return opts, err
	}
	opts.config = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loading, overrides)
	if opts.output != "table" && opts.output != "json" {
		return opts, fmt.Errorf("-o %q: want table or json", opts.output)
	}
	if _, err := labels.Parse(opts.agentSelector); err != nil {
		return opts, fmt.Errorf("--agent-selector %q: %w", opts.agentSelector, err)
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return opts, errors.New("no command: want nodes, node NAME, jobs or job NAME")
	}
	opts.command = rest[0]
	switch opts.command {
	case "nodes", "jobs":
		if len(rest) > 1 {
			return opts, fmt.Errorf("%s takes no argument, got %q", opts.command, rest[1])
		}
	case "node", "job":
		if len(rest) != 2 {
			return opts, fmt.Errorf("%s takes exactly one %s name", opts.command, opts.command)
		}
		opts.name = rest[1]
	default:
		return opts, fmt.Errorf("unknown command %q: want nodes, node NAME, jobs or job NAME", opts.command)
	}
	if opts.allNamespaces && opts.command != "jobs" {
		return opts, fmt.Errorf("--all-namespaces only applies to jobs")
	}
	return opts, nil
}

// run executes the command line and returns the exit status: 0 success, 1 failure, 2 usage.
func run(args []string, stdout, stderr io.Writer, e env) int {
	opts, err := parse(args, stderr)
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "kubectl finegrain: %v\n", err)
		return 2
	}
	opts.now = e.now
	if (opts.command == "jobs" && !opts.allNamespaces) || opts.command == "job" {
		if opts.namespace, _, err = opts.config.Namespace(); err != nil {
			fmt.Fprintf(stderr, "kubectl finegrain: the namespace from the kubeconfig: %v (pass -n NAMESPACE)\n", err)
			return 1
		}
	}
	client, err := e.client(opts.config)
	if err != nil {
		fmt.Fprintf(stderr, "kubectl finegrain: %v\n", err)
		return 1
	}
	switch opts.command {
	case "nodes":
		err = runNodes(client, opts, stdout, stderr)
	case "node":
		err = runNode(client, opts, stdout)
	case "jobs":
		err = runJobs(client, opts, stdout)
	case "job":
		var exec podExec
		if exec, err = e.exec(opts.config); err == nil {
			err = runJob(client, exec, opts, stdout)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "kubectl finegrain %s: %v\n", opts.command, err)
		return 1
	}
	return 0
}
