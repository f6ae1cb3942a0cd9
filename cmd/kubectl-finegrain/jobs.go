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

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/dynamic"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

// maxNodesShown bounds the node names one line of `jobs` prints.
const maxNodesShown = 3

// jobSummary is one HPCJob of `jobs -o json`.
type jobSummary struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	Phase     string    `json:"phase"`
	Workers   int       `json:"workers"`
	Nodes     []string  `json:"nodes"`
	Created   time.Time `json:"created"`
	// Problem says why the status could not be read.
	Problem string `json:"problem,omitempty"`
}

func runJobs(client dynamic.Interface, opts options, stdout io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), opts.timeout)
	defer cancel()
	ns := opts.namespace
	if opts.allNamespaces {
		ns = metav1.NamespaceAll
	}
	list, err := client.Resource(v1alpha1.GroupVersionResource).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return explainJobs(fmt.Errorf("list HPCJobs%s: %w", inNamespace(ns), err), ns)
	}
	out := make([]jobSummary, 0, len(list.Items))
	for i := range list.Items {
		u := &list.Items[i]
		s := jobSummary{Namespace: u.GetNamespace(), Name: u.GetName(), Nodes: []string{}, Created: u.GetCreationTimestamp().Time}
		st, err := jobStatus(u)
		if err != nil {
			s.Problem = err.Error()
		}
		s.Phase, s.Workers = string(st.Phase), len(st.Placements)
		for _, p := range st.Placements {
			if !slices.Contains(s.Nodes, p.Node) {
				s.Nodes = append(s.Nodes, p.Node)
			}
		}
		slices.Sort(s.Nodes)
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b jobSummary) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	if opts.output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string][]jobSummary{"jobs": out})
	}
	return writeJobsTable(stdout, out, opts.allNamespaces, opts.now())
}

func writeJobsTable(w io.Writer, jobs []jobSummary, withNamespace bool, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if withNamespace {
		fmt.Fprint(tw, "NAMESPACE\t")
	}
	fmt.Fprintln(tw, "NAME\tPHASE\tWORKERS\tNODES\tAGE")
	for _, j := range jobs {
		if withNamespace {
			fmt.Fprintf(tw, "%s\t", j.Namespace)
		}
		nodes := strings.Join(j.Nodes[:min(len(j.Nodes), maxNodesShown)], ",")
		if len(j.Nodes) > maxNodesShown {
			nodes += fmt.Sprintf(" and %d more", len(j.Nodes)-maxNodesShown)
		}
		phase := orDash(j.Phase)
		if j.Problem != "" {
			phase = "? (" + j.Problem + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", j.Name, phase, j.Workers, orDash(nodes), duration.HumanDuration(now.Sub(j.Created)))
	}
	return tw.Flush()
}

// jobStatus reads an HPCJob's status, the part the placer writes; the spec is not needed.
func jobStatus(u *unstructured.Unstructured) (v1alpha1.HPCJobStatus, error) {
	var st v1alpha1.HPCJobStatus
	raw, ok := u.Object["status"].(map[string]any)
	if !ok {
		return st, nil
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &st); err != nil {
		return v1alpha1.HPCJobStatus{}, fmt.Errorf("HPCJob %s/%s: status is not an HPCJob status: %w", u.GetNamespace(), u.GetName(), err)
	}
	return st, nil
}

// explainJobs adds what to do for failures an operator can fix.
func explainJobs(err error, ns string) error {
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%w (is the HPCJob CRD installed? kubectl apply -k daemonset)", err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%w (you need get and list on hpcjobs.finegrain.dev%s)", err, inNamespace(ns))
	}
	return err
}

func inNamespace(ns string) string {
	if ns == "" {
		return " in every namespace"
	}
	return " in namespace " + ns
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
