package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/inspect"
)

// jobView is `job NAME -o json`: the job's phase and, per worker, where it was placed, the
// pins its node publishes and, while the job runs, what the node agent reads in its cgroups.
type jobView struct {
	Namespace string       `json:"namespace"`
	Name      string       `json:"name"`
	Phase     string       `json:"phase"`
	Workers   []workerView `json:"workers"`
}

// workerView is one worker of a job.
type workerView struct {
	Worker   string `json:"worker"`
	Tasks    int32  `json:"tasks"`
	Group    int32  `json:"group"`
	Node     string `json:"node"`
	NUMANode int32  `json:"numaNode"`
	// Pins are the worker's exclusive containers as the node's NodeResourceTopology lists them.
	Pins []inspect.Container `json:"pins"`
	// Processes are what the node agent read in the worker's pinned containers' cgroups; only
	// while the job runs.
	Processes []inspect.ContainerProcesses `json:"processes,omitempty"`
	// Notes say what could not be read, and why.
	Notes []string `json:"notes,omitempty"`
}

func runJob(client dynamic.Interface, exec podExec, opts options, stdout io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), opts.timeout)
	defer cancel()
	// 1. The job and its placements, as the placer recorded them.
	u, err := client.Resource(v1alpha1.GroupVersionResource).Namespace(opts.namespace).Get(ctx, opts.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("HPCJob %s/%s not found (%w); kubectl finegrain jobs -n %s lists the jobs there", opts.namespace, opts.name, err, opts.namespace)
	}
	if err != nil {
		return explainJobs(fmt.Errorf("read HPCJob %s/%s: %w", opts.namespace, opts.name, err), opts.namespace)
	}
	st, err := jobStatus(u)
	if err != nil {
		return err
	}
	view := jobView{Namespace: opts.namespace, Name: opts.name, Phase: string(st.Phase), Workers: make([]workerView, 0, len(st.Placements))}
	for _, p := range st.Placements {
		view.Workers = append(view.Workers, workerView{Worker: p.Worker, Tasks: p.Tasks, Group: p.Group, Node: p.Node, NUMANode: p.NUMANode, Pins: []inspect.Container{}})
	}
	// 2. Each worker's pins, from its node's NodeResourceTopology.
	addPins(ctx, client, &view)
	// 3. While the job runs, the processes the node agents read in the workers' cgroups.
	if st.Phase == v1alpha1.PhaseRunning {
		addProcesses(ctx, client, exec, opts, &view)
	}
	if opts.output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(view)
	}
	return writeJobTable(stdout, view)
}

// addPins fills in every worker's exclusive containers from its node's published pins.
func addPins(ctx context.Context, client dynamic.Interface, view *jobView) {
	byNode := map[string]inspect.Pins{}
	failed := map[string]error{}
	for i := range view.Workers {
		w := &view.Workers[i]
		if _, done := byNode[w.Node]; !done && failed[w.Node] == nil {
			if v, err := nodePins(ctx, client, w.Node); err != nil {
				failed[w.Node] = err
			} else {
				byNode[w.Node] = v
			}
		}
		if err := failed[w.Node]; err != nil {
			w.Notes = append(w.Notes, "pins not shown: "+err.Error())
			continue
		}
		for _, c := range byNode[w.Node].Containers {
			if c.Pool == inspect.PoolExclusive && c.Namespace == view.Namespace && c.Pod == w.Worker {
				w.Pins = append(w.Pins, c)
			}
		}
		if len(w.Pins) == 0 {
			w.Notes = append(w.Notes, fmt.Sprintf("no exclusive CPUs published for this worker on %s: its node agent has not pinned it yet", w.Node))
		}
	}
}

var podsResource = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// agentParallelism bounds the exec sessions open at once.
const agentParallelism = 8

// addProcesses asks the node agent of every node that holds workers for the processes of
// their pinned containers, several nodes at a time, and files each answer under its worker.
func addProcesses(ctx context.Context, client dynamic.Interface, exec podExec, opts options, view *jobView) {
	workersOn := map[string][]int{}
	var nodes []string
	for i, w := range view.Workers {
		if workersOn[w.Node] == nil {
			nodes = append(nodes, w.Node)
		}
		workersOn[w.Node] = append(workersOn[w.Node], i)
	}
	answers := make([]agentAnswer, len(nodes))
	sem := make(chan struct{}, agentParallelism)
	var wg sync.WaitGroup
	for n, node := range nodes {
		pods := make([]string, 0, len(workersOn[node]))
		for _, i := range workersOn[node] {
			pods = append(pods, view.Namespace+"/"+view.Workers[i].Worker)
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			answers[n] = askAgent(ctx, client, exec, opts, node, pods)
		})
	}
	wg.Wait()
	for n, node := range nodes {
		for _, i := range workersOn[node] {
			w := &view.Workers[i]
			if answers[n].err != nil {
				w.Notes = append(w.Notes, "processes not shown: "+answers[n].err.Error())
				continue
			}
			for _, c := range answers[n].containers {
				if c.Namespace == view.Namespace && c.Pod == w.Worker {
					w.Processes = append(w.Processes, c)
				}
			}
			if len(w.Processes) == 0 {
				w.Notes = append(w.Notes, fmt.Sprintf("the node agent on %s holds no pinned container of this worker", node))
			}
		}
	}
}

// agentAnswer is what one node agent said, or why it could not be asked.
type agentAnswer struct {
	containers []inspect.ContainerProcesses
	err        error
}

// Bounds of one agent's answer: the listing it prints (at most 4096 processes) and its errors.
const (
	maxAgentStdout = 16 << 20
	maxAgentStderr = 64 << 10
)

// askAgent runs `nodeagent pins --processes` for the given pods in the agent pod of node.
func askAgent(ctx context.Context, client dynamic.Interface, exec podExec, opts options, node string, pods []string) agentAnswer {
	pod, err := agentPod(ctx, client, opts, node)
	if err != nil {
		return agentAnswer{err: err}
	}
	cmd := []string{"/usr/local/bin/nodeagent", "pins", "--processes", "-o", "json"}
	for _, p := range pods {
		cmd = append(cmd, "--pod", p)
	}
	where := fmt.Sprintf("node agent %s/%s on %s", opts.agentNamespace, pod, node)
	stdout, stderr := &boundedBuffer{max: maxAgentStdout}, &boundedBuffer{max: maxAgentStderr}
	if err := exec.Exec(ctx, opts.agentNamespace, pod, opts.agentContainer, cmd, stdout, stderr); err != nil {
		if msg := strings.TrimSpace(string(stderr.buf)); msg != "" {
			err = fmt.Errorf("%w: %s", err, msg)
		}
		if apierrors.IsForbidden(err) {
			err = fmt.Errorf("%w (seeing processes needs get and create on pods/exec in namespace %s)", err, opts.agentNamespace)
		}
		return agentAnswer{err: fmt.Errorf("ask the %s: %w", where, err)}
	}
	if stdout.truncated {
		return agentAnswer{err: fmt.Errorf("the %s answered more than %d bytes; is it a finegrain node agent?", where, maxAgentStdout)}
	}
	v, err := inspect.DecodeProcesses(stdout.buf, "the "+where)
	if err != nil {
		return agentAnswer{err: err}
	}
	if v.Node != node {
		return agentAnswer{err: fmt.Errorf("the %s answered for node %q; check --agent-selector", where, v.Node)}
	}
	return agentAnswer{containers: v.Containers}
}

// agentPod finds the running node agent pod of node: in the agents' namespace, with the
// agents' labels, bound to node.
func agentPod(ctx context.Context, client dynamic.Interface, opts options, node string) (string, error) {
	list, err := client.Resource(podsResource).Namespace(opts.agentNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: opts.agentSelector, FieldSelector: "spec.nodeName=" + node,
	})
	if apierrors.IsForbidden(err) {
		return "", fmt.Errorf("cannot list the node agent pods in namespace %s (%w); seeing processes needs list on pods and create on pods/exec there", opts.agentNamespace, err)
	}
	if err != nil {
		return "", fmt.Errorf("list the node agent pods in namespace %s: %w", opts.agentNamespace, err)
	}
	var others []string
	for _, p := range list.Items {
		nodeName, _, _ := unstructured.NestedString(p.Object, "spec", "nodeName")
		if nodeName != node || p.GetDeletionTimestamp() != nil {
			continue
		}
		phase, _, _ := unstructured.NestedString(p.Object, "status", "phase")
		if phase == "Running" {
			return p.GetName(), nil
		}
		others = append(others, fmt.Sprintf("%s is %s", p.GetName(), orDash(phase)))
	}
	if len(others) > 0 {
		slices.Sort(others)
		return "", fmt.Errorf("no running node agent pod on %s (%s)", node, strings.Join(others, ", "))
	}
	return "", fmt.Errorf("no node agent pod on %s (namespace %s, labels %s); is the finegrain DaemonSet running there?", node, opts.agentNamespace, opts.agentSelector)
}

// writeJobTable prints the job's phase, one line per worker and pinned container, the
// processes the node agents read, and the notes.
func writeJobTable(w io.Writer, v jobView) error {
	nodes := map[string]bool{}
	for _, wk := range v.Workers {
		nodes[wk.Node] = true
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "HPCJob %s/%s: %s, %d workers on %d nodes\n\n", v.Namespace, v.Name, orDash(v.Phase), len(v.Workers), len(nodes))
	tw := tabwriter.NewWriter(bw, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKER\tTASKS\tGROUP\tNODE\tNUMA NODE\tCONTAINER\tPINNED CPUS\tMEMORY NODES")
	var containers []inspect.ContainerProcesses
	var notes []string
	for _, wk := range v.Workers {
		lead := fmt.Sprintf("%s\t%d\t%d\t%s\t%d", wk.Worker, wk.Tasks, wk.Group, wk.Node, wk.NUMANode)
		if len(wk.Pins) == 0 {
			fmt.Fprintf(tw, "%s\t-\t-\t-\n", lead)
		}
		for _, c := range wk.Pins {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", lead, c.Container, c.CPUs, orDash(c.Mems))
		}
		containers = append(containers, wk.Processes...)
		for _, n := range wk.Notes {
			notes = append(notes, fmt.Sprintf("  %s: %s", wk.Worker, n))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	switch {
	case v.Phase != string(v1alpha1.PhaseRunning):
		fmt.Fprintf(bw, "\nProcesses are shown while the job runs.\n")
	case len(containers) > 0:
		fmt.Fprintf(bw, "\nProcesses in the workers' pinned containers, read by the node agents from their cgroups:\n")
		if err := bw.Flush(); err != nil {
			return err
		}
		if err := inspect.WriteProcessesTable(bw, containers); err != nil {
			return err
		}
	}
	if len(notes) > 0 {
		fmt.Fprintf(bw, "\nNotes:\n%s\n", strings.Join(notes, "\n"))
	}
	return bw.Flush()
}
