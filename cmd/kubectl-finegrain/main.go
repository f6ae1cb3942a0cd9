// Command kubectl-finegrain is a kubectl plugin (`kubectl finegrain ...`) that shows the
// cluster's free-core maps and pins from the NodeResourceTopology objects finegrain's node agents
// publish (`nodes` summarises every node, `node NAME` details one) and where the HPCJobs run
// (`jobs` lists them, `job NAME` shows each worker's node, NUMA node and pinned CPUs and, while
// the job runs, the processes and MPI ranks the node agents read in the workers' cgroups, asked
// through the pods/exec subresource of the agent pods). It takes kubectl's kubeconfig flags
// (--kubeconfig, --context, --namespace, --server, --token, ...). It only reads from the API
// server; its one write is the exec that runs `nodeagent pins --processes` in an agent pod.
// This file assembles the commands; nodes.go, node.go, jobs.go and job.go print.
package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/finegrain-dev/finegrain/internal/cli"
)

// long is the help text of `kubectl finegrain`.
const long = `Shows what finegrain's node agents publish in their NodeResourceTopology objects
(topology.node.k8s.io/v1alpha2): per node and NUMA node, the CPUs exclusive requests can still
get, and which container holds which exclusive CPUs; and where finegrain's HPCJobs run. It takes
kubectl's kubeconfig flags (--kubeconfig, --context, -n, ...) before or after the command.`

// Defaults of the flags that find the node agent pods: the DaemonSet's namespace, labels and
// container (daemonset/nodeagent/daemonset.yaml).
const (
	defaultAgentNamespace = "finegrain-system"
	defaultAgentSelector  = "app.kubernetes.io/name=finegrain-nodeagent"
	defaultAgentContainer = "nodeagent"
)

// options are what a command runs with: its flags, and what the kubeconfig flags resolve to.
type options struct {
	// name is the node of `node` or the job of `job`.
	name          string
	output        string
	timeout       time.Duration
	allNamespaces bool
	// namespace is the one -n or the kubeconfig's context names, for jobs and job.
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

// env is what the commands take from the outside world; tests replace it.
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

// run runs the command line and returns the exit status: 0 success, 1 failure, 2 usage.
func run(args []string, stdout, stderr io.Writer, e env) int {
	return cli.Execute(newRoot(e), args, stdout, stderr)
}

// program holds the flags every command takes: where the cluster is and how long to wait for it.
type program struct {
	env       env
	loading   *clientcmd.ClientConfigLoadingRules
	overrides *clientcmd.ConfigOverrides
	timeout   time.Duration
}

func newRoot(e env) *cobra.Command {
	p := &program{env: e, loading: clientcmd.NewDefaultClientConfigLoadingRules(), overrides: &clientcmd.ConfigOverrides{}}
	root := cli.NewRoot("kubectl-finegrain", "finegrain's free-core maps, pins and HPCJobs, from the cluster", long,
		p.nodesCommand(), p.nodeCommand(), p.jobsCommand(), p.jobCommand())
	root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl finegrain"}
	fs := root.PersistentFlags()
	fs.StringVar(&p.loading.ExplicitPath, "kubeconfig", "", "path to the kubeconfig file")
	clientcmd.BindOverrideFlags(p.overrides, fs, clientcmd.RecommendedConfigOverrideFlags(""))
	fs.DurationVar(&p.timeout, "timeout", 30*time.Second, "how long to wait for the API server (and, for job, the node agents)")
	return root
}

// command completes c, which prints with run: -o, then on each call the options and the client
// the kubeconfig flags make.
func (p *program) command(c *cobra.Command, opts *options, run func(client dynamic.Interface, opts options, stdout, stderr io.Writer) error) *cobra.Command {
	c.Flags().StringVarP(&opts.output, "output", "o", "table", "output format: table or json")
	c.DisableFlagsInUseLine = true
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if opts.output != "table" && opts.output != "json" {
			return cli.Usagef("--output %q: want table or json", opts.output)
		}
		if len(args) == 1 {
			opts.name = args[0]
		}
		opts.timeout, opts.now = p.timeout, p.env.now
		opts.config = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(p.loading, p.overrides)
		client, err := p.env.client(opts.config)
		if err != nil {
			return err
		}
		return run(client, *opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
	}
	return c
}

// namespace is the namespace -n names, else the kubeconfig context's.
func namespace(opts options) (string, error) {
	ns, _, err := opts.config.Namespace()
	if err != nil {
		return "", fmt.Errorf("the namespace from the kubeconfig: %w (pass -n NAMESPACE)", err)
	}
	return ns, nil
}

func (p *program) nodesCommand() *cobra.Command {
	var opts options
	return p.command(&cobra.Command{
		Use:   "nodes [-o table|json]",
		Short: "one line per node: generation, last update, free CPUs and what one exclusive request could get per NUMA node, pinned containers",
		Long: "Prints one line per node: the generation and age of its NodeResourceTopology, the containers\n" +
			"pinned there, and per NUMA node what one exclusive request could get and the free CPUs. A node\n" +
			"without the object, or an object without its node, is listed with the problem.",
		Args: cli.NoArgs,
	}, &opts, runNodes)
}

func (p *program) nodeCommand() *cobra.Command {
	var opts options
	return p.command(&cobra.Command{
		Use:   "node NAME [-o table|json]",
		Short: "one node in detail: every NUMA node's counts and free CPU list, every pin",
		Long:  "Prints one node's NodeResourceTopology in detail: every NUMA node's counts and free CPU list,\nand every pinned container with its CPUs and memory node.",
		Args:  cli.ExactArgs(1, "one node name"),
	}, &opts, func(client dynamic.Interface, opts options, stdout, _ io.Writer) error {
		return runNode(client, opts, stdout)
	})
}

func (p *program) jobsCommand() *cobra.Command {
	var opts options
	c := p.command(&cobra.Command{
		Use:   "jobs [-n NAMESPACE | -A] [-o table|json]",
		Short: "one line per HPCJob: phase, workers, nodes, age",
		Long:  "Prints one line per HPCJob of the namespace (-n, else the kubeconfig context's), or of every\nnamespace with -A: its phase, its workers, the nodes they run on and its age.",
		Args:  cli.NoArgs,
	}, &opts, func(client dynamic.Interface, opts options, stdout, _ io.Writer) error {
		if !opts.allNamespaces {
			var err error
			if opts.namespace, err = namespace(opts); err != nil {
				return err
			}
		}
		return runJobs(client, opts, stdout)
	})
	c.Flags().BoolVarP(&opts.allNamespaces, "all-namespaces", "A", false, "list the HPCJobs of every namespace")
	return c
}

func (p *program) jobCommand() *cobra.Command {
	var opts options
	c := p.command(&cobra.Command{
		Use:   "job NAME [-n NAMESPACE] [-o table|json]",
		Short: "one HPCJob: each worker's node, NUMA node and pinned CPUs, and while it runs the processes and MPI ranks in them",
		Long: "Prints one HPCJob: each worker's node, NUMA node and pinned CPUs and, while it runs, every\n" +
			"process in the workers' pinned containers with its PID, MPI rank, allowed CPUs and memory\n" +
			"nodes, read by the node agent of each worker's node through pods/exec (which needs get and\n" +
			"create on pods/exec in the agents' namespace).",
		Args: cli.ExactArgs(1, "one job name"),
		PreRunE: func(*cobra.Command, []string) error {
			if _, err := labels.Parse(opts.agentSelector); err != nil {
				return cli.Usagef("--agent-selector %q: %w", opts.agentSelector, err)
			}
			return nil
		},
	}, &opts, func(client dynamic.Interface, opts options, stdout, _ io.Writer) error {
		var err error
		if opts.namespace, err = namespace(opts); err != nil {
			return err
		}
		exec, err := p.env.exec(opts.config)
		if err != nil {
			return err
		}
		return runJob(client, exec, opts, stdout)
	})
	fs := c.Flags()
	fs.StringVar(&opts.agentNamespace, "agent-namespace", defaultAgentNamespace, "namespace of the node agent pods")
	fs.StringVar(&opts.agentSelector, "agent-selector", defaultAgentSelector, "label selector of the node agent pods")
	fs.StringVar(&opts.agentContainer, "agent-container", defaultAgentContainer, "container of the node agent pods")
	return c
}
