// Package dryrun owns `placer plan`: it reads an HPCJob (or names a pod group) and a cluster
// snapshot from files, plans the gang exactly as the controller would, and renders the result as
// JSON (a public contract: docs/placer.md) or text. It must not contact a cluster.
package dryrun

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	schedv1alpha1 "github.com/finegrain-dev/finegrain/pkg/apis/scheduling/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/placer/hpcjob"
	"github.com/finegrain-dev/finegrain/pkg/placer/plan"
	"github.com/finegrain-dev/finegrain/pkg/placer/snapshot"
)

// Options are the flags of `placer plan`.
type Options struct {
	// JobFile is an HPCJob in YAML or JSON; PodGroup ("namespace/name") plans the pending pods
	// of a plain pod gang from the cluster file instead. Exactly one is set.
	JobFile  string
	PodGroup string
	// ClusterFile is what `kubectl get nodes,noderesourcetopologies,pods,hpcjobs -A -o yaml` prints.
	ClusterFile string
	// Output is "json" or "text".
	Output string
	// SchedulerName is the schedulerName the job's pods get.
	SchedulerName string
	// NoTaskGroups plans as a placer run with --task-groups=false.
	NoTaskGroups bool
}

// Output is a successful plan.
type Output struct {
	Job       string `json:"job"`
	Nodes     int    `json:"nodes"`
	Workers   int    `json:"workers"`
	Groups    int    `json:"groups"`
	NodesUsed int    `json:"nodesUsed"`
	// Note explains a choice that differs from the plain policy.
	Note       string                `json:"note,omitempty"`
	Placements []PlacementOut        `json:"placements"`
	Unplaced   []string              `json:"unplaced,omitempty"`
	Launcher   *LauncherOut          `json:"launcher,omitempty"`
	Hostfile   string                `json:"hostfile,omitempty"`
	Assumed    []snapshot.Assumption `json:"assumed,omitempty"`
	Warnings   []string              `json:"warnings,omitempty"`
}

// PlacementOut is one worker's placement. NUMANode is -1 for a pod in the shared pool.
type PlacementOut struct {
	Worker   string `json:"worker"`
	Tasks    int    `json:"tasks,omitempty"`
	Group    int    `json:"group"`
	Node     string `json:"node"`
	NUMANode int    `json:"numaNode"`
}

// LauncherOut is where the launcher goes.
type LauncherOut struct {
	Pod  string `json:"pod"`
	Node string `json:"node"`
}

// ErrorOut is printed when there is no plan.
type ErrorOut struct {
	Error string `json:"error"`
	// Reason is the dominant reason kind when the gang does not fit, "invalid" for a bad job.
	Reason   string   `json:"reason,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
}

// Plan reads the inputs and plans. Warnings about the inputs are returned with the error too.
func Plan(opts Options) (*Output, []string, error) {
	if (opts.JobFile == "") == (opts.PodGroup == "") {
		return nil, nil, errors.New("give exactly one of --job FILE and --pod-group NAMESPACE/NAME")
	}
	if opts.ClusterFile == "" {
		return nil, nil, errors.New("give --cluster FILE (kubectl get nodes,noderesourcetopologies,pods,hpcjobs -A -o yaml)")
	}
	f, err := os.Open(opts.ClusterFile)
	if err != nil {
		return nil, nil, fmt.Errorf("open cluster snapshot: %w", err)
	}
	defer f.Close()
	in, warnings, err := snapshot.ReadObjects(f, opts.ClusterFile)
	if err != nil {
		return nil, nil, err
	}
	cache := snapshot.NewCache(opts.SchedulerName)
	cache.Add(in)
	s := cache.Snapshot()
	warnings = append(warnings, s.Warnings()...)
	var out *Output
	if opts.JobFile != "" {
		out, err = planJob(s, opts)
	} else {
		out, err = planPodGroup(s, in, opts.PodGroup)
	}
	if err != nil {
		return nil, warnings, err
	}
	out.Assumed = s.Assumed()
	out.Warnings = warnings
	return out, warnings, nil
}

func planJob(s *snapshot.Snapshot, opts Options) (*Output, error) {
	data, err := os.ReadFile(opts.JobFile)
	if err != nil {
		return nil, fmt.Errorf("read job: %w", err)
	}
	job, err := v1alpha1.Decode(data, opts.JobFile)
	if err != nil {
		return nil, err
	}
	jp, err := hpcjob.PlanJob(s, job, hpcjob.Options{SchedulerName: opts.SchedulerName, NoTaskGroups: opts.NoTaskGroups})
	if err != nil {
		return nil, err
	}
	out := &Output{
		Job:   job.Namespace + "/" + job.Name,
		Nodes: jp.Choice.Nodes, Workers: jp.Choice.Workers, Groups: jp.Choice.Groups,
		NodesUsed: jp.Result.NodesUsed, Note: jp.Note, Hostfile: jp.Hostfile,
	}
	fill(out, jp.Gang, jp.Result, func(i int) int { return jp.Workers[i].Tasks })
	return out, nil
}

// podGroupGang makes the gang of a pod group as the placer does: from its PodGroup, which the
// snapshot must hold, when its pods use scheduling.x-k8s.io/pod-group, else from the deprecated
// labels.
func podGroupGang(s *snapshot.Snapshot, in snapshot.Input, ns, name string, pods []*corev1.Pod) (*plan.Gang, error) {
	if !plan.UsesPodGroup(pods) {
		return plan.PodGang(ns, name, pods)
	}
	for _, u := range in.PodGroups {
		if u.GetNamespace() != ns || u.GetName() != name {
			continue
		}
		pg, err := schedv1alpha1.FromUnstructured(u)
		if err != nil {
			return nil, err
		}
		if err := plan.MinResourcesFit(s, pg, pods); err != nil {
			return nil, err
		}
		return plan.PodGroupGang(pg, pods)
	}
	return nil, fmt.Errorf("the pods of %s/%s are labelled %s but the cluster snapshot has no PodGroup %s/%s: add podgroups to the kubectl get that made it",
		ns, name, schedv1alpha1.LabelPodGroup, ns, name)
}

func planPodGroup(s *snapshot.Snapshot, in snapshot.Input, group string) (*Output, error) {
	ns, name, ok := strings.Cut(group, "/")
	if !ok || ns == "" || name == "" {
		return nil, fmt.Errorf("--pod-group %q: want NAMESPACE/NAME", group)
	}
	var pods = in.Pods[:0:0]
	for _, p := range in.Pods {
		if g, _, ok := schedv1alpha1.GroupOf(p); ok && p.Namespace == ns && g == name {
			pods = append(pods, p)
		}
	}
	if len(pods) == 0 {
		return nil, fmt.Errorf("the cluster snapshot has no pods labelled %s=%s (or %s=%s) in namespace %s",
			schedv1alpha1.LabelPodGroup, name, v1alpha1.LabelPodGroup, name, ns)
	}
	g, err := podGroupGang(s, in, ns, name, pods)
	if err != nil {
		return nil, err
	}
	res, err := plan.Plan(s, g)
	if err != nil {
		return nil, err
	}
	out := &Output{Job: g.Key, Nodes: res.NodesUsed, Workers: len(g.Members), Groups: g.Groups, NodesUsed: res.NodesUsed}
	fill(out, g, res, func(int) int { return 0 })
	return out, nil
}

func fill(out *Output, g *plan.Gang, res *plan.Result, tasks func(int) int) {
	for _, p := range res.Placements {
		m := &g.Members[p.Member]
		out.Placements = append(out.Placements, PlacementOut{Worker: m.Name, Tasks: tasks(p.Member), Group: m.Group, Node: p.Node, NUMANode: p.NUMA})
	}
	slices.SortStableFunc(out.Placements, func(a, b PlacementOut) int { return compareNames(a.Worker, b.Worker) })
	for _, i := range res.Unplaced {
		out.Unplaced = append(out.Unplaced, g.Members[i].Name)
	}
	if res.Launcher != nil {
		out.Launcher = &LauncherOut{Pod: g.Launcher.Name, Node: res.Launcher.Node}
	}
}

// compareNames orders "x-worker-2" before "x-worker-10".
func compareNames(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}

// Write renders a plan or an error in the requested format.
func Write(w io.Writer, format string, out *Output, warnings []string, planErr error) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if planErr != nil {
			return enc.Encode(errorOut(planErr, warnings))
		}
		return enc.Encode(out)
	case "text":
		if planErr != nil {
			_, err := fmt.Fprintf(w, "error: %v\n", planErr)
			return err
		}
		return writeText(w, out)
	default:
		return fmt.Errorf("output format %q: want json or text", format)
	}
}

func errorOut(err error, warnings []string) ErrorOut {
	e := ErrorOut{Error: err.Error(), Warnings: warnings}
	var fe *plan.FitError
	var ie *v1alpha1.InvalidError
	switch {
	case errors.As(err, &fe):
		e.Reason = string(fe.Kind())
	case errors.As(err, &ie):
		e.Reason = "invalid"
	}
	return e
}

func writeText(w io.Writer, o *Output) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d nodes, %d workers, %d groups (%d nodes used)\n", o.Job, o.Nodes, o.Workers, o.Groups, o.NodesUsed)
	if o.Note != "" {
		fmt.Fprintf(&b, "note: %s\n", o.Note)
	}
	fmt.Fprintf(&b, "%-32s %6s %6s %-24s %s\n", "WORKER", "TASKS", "GROUP", "NODE", "NUMA")
	for _, p := range o.Placements {
		tasks, numa := "-", "shared"
		if p.Tasks > 0 {
			tasks = strconv.Itoa(p.Tasks)
		}
		if p.NUMANode >= 0 {
			numa = strconv.Itoa(p.NUMANode)
		}
		fmt.Fprintf(&b, "%-32s %6s %6d %-24s %s\n", p.Worker, tasks, p.Group, p.Node, numa)
	}
	for _, u := range o.Unplaced {
		fmt.Fprintf(&b, "%-32s not placed (minAvailable allows it)\n", u)
	}
	if o.Launcher != nil {
		fmt.Fprintf(&b, "launcher %s on %s\n", o.Launcher.Pod, o.Launcher.Node)
	}
	for _, a := range o.Assumed {
		fmt.Fprintf(&b, "assumed: %s holds %d CPUs of NUMA node %d on %s (not yet in the node's free-core map)\n", a.Pod, a.CPUs, a.NUMA, a.Node)
	}
	for _, wn := range o.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", wn)
	}
	if o.Hostfile != "" {
		fmt.Fprintf(&b, "hostfile:\n%s", o.Hostfile)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
