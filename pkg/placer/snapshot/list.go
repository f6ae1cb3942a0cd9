package snapshot

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	schedv1alpha1 "github.com/finegrain-dev/finegrain/pkg/apis/scheduling/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
)

// ReadObjects reads the cluster objects a snapshot needs from YAML or JSON: what
// `kubectl get nodes,noderesourcetopologies,pods,hpcjobs -A -o yaml` prints (a v1 List), typed
// lists (NodeList, PodList) or single objects, as one document or several separated by "---".
// HPCJobs give the records that make their workers count as theirs (RecordOf). Objects of other
// kinds are skipped and counted in the returned warnings. source names the input in
// errors, which name the document and item at fault.
func ReadObjects(r io.Reader, source string) (Input, []string, error) {
	var in Input
	skipped := map[string]int{}
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	for doc := 0; ; doc++ {
		var obj map[string]any
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Input{}, nil, fmt.Errorf("read %s document %d: %w", source, doc, err)
		}
		if obj == nil {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		if !strings.HasSuffix(u.GetKind(), "List") {
			if err := in.add(u, skipped); err != nil {
				return Input{}, nil, fmt.Errorf("read %s document %d: %w", source, doc, err)
			}
			continue
		}
		items, ok := obj["items"].([]any)
		if !ok && obj["items"] != nil {
			return Input{}, nil, fmt.Errorf("read %s document %d: %s items is not a list", source, doc, u.GetKind())
		}
		itemKind := strings.TrimSuffix(u.GetKind(), "List")
		for i, item := range items {
			m, ok := item.(map[string]any)
			if !ok {
				return Input{}, nil, fmt.Errorf("read %s document %d item %d: not an object", source, doc, i)
			}
			iu := &unstructured.Unstructured{Object: m}
			if iu.GetKind() == "" && itemKind != "" {
				iu.SetKind(itemKind)
			}
			if err := in.add(iu, skipped); err != nil {
				return Input{}, nil, fmt.Errorf("read %s document %d item %d: %w", source, doc, i, err)
			}
		}
	}
	var warnings []string
	for kind, n := range skipped {
		warnings = append(warnings, fmt.Sprintf("%s: skipped %d objects of kind %q (only Node, Pod, NodeResourceTopology, HPCJob and PodGroup are used)", source, n, kind))
	}
	slices.Sort(warnings)
	return in, warnings, nil
}

func (in *Input) add(u *unstructured.Unstructured, skipped map[string]int) error {
	switch u.GetKind() {
	case "Node":
		var n corev1.Node
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &n); err != nil {
			return fmt.Errorf("Node %s: %w", u.GetName(), err)
		}
		in.Nodes = append(in.Nodes, &n)
	case "Pod":
		var p corev1.Pod
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p); err != nil {
			return fmt.Errorf("Pod %s/%s: %w", u.GetNamespace(), u.GetName(), err)
		}
		in.Pods = append(in.Pods, &p)
	case nrt.Kind:
		in.Topologies = append(in.Topologies, u)
	case schedv1alpha1.Kind:
		in.PodGroups = append(in.PodGroups, u)
	case v1alpha1.Kind:
		var job v1alpha1.HPCJob
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &job); err != nil {
			return fmt.Errorf("HPCJob %s/%s: %w", u.GetNamespace(), u.GetName(), err)
		}
		if in.Jobs == nil {
			in.Jobs = map[string]JobRecord{}
		}
		in.Jobs[job.Namespace+"/"+job.Name] = RecordOf(&job)
	default:
		skipped[u.GetKind()]++
	}
	return nil
}
