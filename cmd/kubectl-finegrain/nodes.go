package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/finegrain-dev/finegrain/pkg/inspect"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
)

var nodesResource = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}

// nodeSummary is one node of `nodes -o json`: its free-core map, or why there is none.
type nodeSummary struct {
	Name    string        `json:"name"`
	Pins    *inspect.Pins `json:"pins,omitempty"`
	Problem string        `json:"problem,omitempty"`
}

func runNodes(client dynamic.Interface, opts options, stdout, stderr io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), opts.timeout)
	defer cancel()
	list, err := client.Resource(nrt.GroupVersionResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return explain(fmt.Errorf("list NodeResourceTopology objects: %w", err))
	}
	nodes, err := client.Resource(nodesResource).List(ctx, metav1.ListOptions{})
	bounds := map[string]int{}
	if err == nil {
		for i := range nodes.Items {
			var n corev1.Node
			if runtime.DefaultUnstructuredConverter.FromUnstructured(nodes.Items[i].Object, &n) == nil {
				bounds[n.Name] = nrt.MaxCPUs(&n)
			}
		}
	}
	byName := map[string]*nodeSummary{}
	for i := range list.Items {
		name := list.Items[i].GetName()
		bound, ok := bounds[name]
		if !ok {
			bound = nrt.MaxCPUs(nil)
		}
		byName[name] = summarize(&list.Items[i], bound)
	}
	switch {
	case err == nil:
		known := map[string]bool{}
		for _, n := range nodes.Items {
			known[n.GetName()] = true
			if byName[n.GetName()] == nil {
				byName[n.GetName()] = &nodeSummary{Name: n.GetName(), Problem: "no NodeResourceTopology: no finegrain node agent publishes for this node"}
			}
		}
		for name, s := range byName {
			if !known[name] && s.Problem == "" {
				s.Problem = "no Node of this name: the object outlived its node"
			}
		}
	case apierrors.IsForbidden(err):
		fmt.Fprintf(stderr, "kubectl finegrain nodes: cannot list Nodes (%v); nodes without a NodeResourceTopology are not shown\n", err)
	default:
		return fmt.Errorf("list Nodes: %w", err)
	}
	out := make([]nodeSummary, 0, len(byName))
	for _, s := range byName {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b nodeSummary) int { return cmp.Compare(a.Name, b.Name) })
	if opts.output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string][]nodeSummary{"nodes": out})
	}
	return writeNodesTable(stdout, out, opts.now())
}

// summarize reads one object, its CPU lists within bound (nrt.MaxCPUs of its Node); a problem is
// kept, not fatal, so one bad node does not hide the others.
func summarize(u *unstructured.Unstructured, bound int) *nodeSummary {
	s := &nodeSummary{Name: u.GetName()}
	o, err := nrt.FromUnstructured(u)
	if err == nil {
		var v inspect.Pins
		if v, err = inspect.FromNRT(o, bound); err == nil {
			s.Pins = &v
			return s
		}
	}
	s.Problem = err.Error()
	return s
}

func writeNodesTable(w io.Writer, nodes []nodeSummary, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tGENERATION\tUPDATED\tPINNED\tAVAILABLE\tFREE CPUS")
	for _, n := range nodes {
		if n.Pins == nil {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t%s\n", n.Name, n.Problem)
			continue
		}
		v := n.Pins
		updated := "-"
		if v.UpdatedAt != nil {
			updated = now.Sub(*v.UpdatedAt).Round(time.Second).String() + " ago"
		}
		var avail, free []string
		for _, z := range v.NUMANodes {
			avail = append(avail, fmt.Sprintf("%d:%d", z.ID, z.Available))
			list := z.FreeCPUs
			if list == "" {
				list = "none"
			}
			free = append(free, fmt.Sprintf("%d:%s", z.ID, list))
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%s\n", n.Name, v.Generation, updated, len(v.Containers), strings.Join(avail, " "), strings.Join(free, " "))
	}
	return tw.Flush()
}

// explain adds what to do for failures an operator can fix.
func explain(err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%w (is the NodeResourceTopology CRD installed? kubectl apply -f daemonset/crds/noderesourcetopology.yaml)", err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%w (you need get and list on noderesourcetopologies.topology.node.k8s.io)", err)
	}
	return err
}
