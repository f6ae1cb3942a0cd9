// Command kubectl-finegrain is a kubectl plugin (`kubectl finegrain ...`) that shows the
// cluster's free-core maps and pins from the NodeResourceTopology objects finegrain's node agents
// publish: `nodes` summarises every node, `node NAME` details one. It takes kubectl's kubeconfig
// flags (--kubeconfig, --context, --server, --token, ...). It only reads from the API server.
// This file parses the command line; nodes.go and node.go print.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
)

const usage = `usage: kubectl finegrain <command> [flags]

Shows what finegrain's node agents publish in their NodeResourceTopology objects
(topology.node.k8s.io/v1alpha2): per node and NUMA node, the CPUs exclusive requests can still
get, and which container holds which exclusive CPUs.

commands:
  nodes        one line per node: generation, last update, free CPUs and what one exclusive
               request could get per NUMA node, pinned containers
  node NAME    one node in detail: every NUMA node's counts and free CPU list, every pin

flags:
`

// options are the parsed command line.
type options struct {
	command string
	node    string
	output  string
	timeout time.Duration
	config  clientcmd.ClientConfig
	now     func() time.Time
}

// clientFactory makes the dynamic client from the kubeconfig flags.
type clientFactory func(clientcmd.ClientConfig) (dynamic.Interface, error)

// env is what run takes from the outside world; tests replace it.
type env struct {
	client clientFactory
	now    func() time.Time
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, env{client: newClient, now: time.Now}))
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
	fs.DurationVar(&opts.timeout, "timeout", 30*time.Second, "how long to wait for the API server")
	if err := fs.Parse(args); err != nil {
		return opts, err
	}
	opts.config = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loading, overrides)
	if opts.output != "table" && opts.output != "json" {
		return opts, fmt.Errorf("-o %q: want table or json", opts.output)
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return opts, errors.New("no command: want nodes or node NAME")
	}
	opts.command = rest[0]
	switch {
	case opts.command == "nodes" && len(rest) == 1:
	case opts.command == "node" && len(rest) == 2:
		opts.node = rest[1]
	case opts.command == "node":
		return opts, errors.New("node takes exactly one node name")
	case opts.command == "nodes":
		return opts, fmt.Errorf("nodes takes no argument, got %q", rest[1])
	default:
		return opts, fmt.Errorf("unknown command %q: want nodes or node NAME", opts.command)
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
	client, err := e.client(opts.config)
	if err != nil {
		fmt.Fprintf(stderr, "kubectl finegrain: %v\n", err)
		return 1
	}
	if opts.command == "nodes" {
		err = runNodes(client, opts, stdout, stderr)
	} else {
		err = runNode(client, opts, stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "kubectl finegrain %s: %v\n", opts.command, err)
		return 1
	}
	return 0
}
