// Package test renders and lints the finegrain Helm chart (charts/finegrain) with the Helm Go
// module and checks it against the kustomize base (daemonset/) built with the kustomize Go
// module: with the default values `helm template` gives the objects of `kubectl kustomize
// daemonset/`, and each value changes what values.yaml says it changes. It is a module of its
// own so that Helm's and kustomize's dependencies stay out of finegrain's; `make test` runs it.
package test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

const (
	chartDir  = ".."
	baseDir   = "../../../daemonset"
	namespace = "finegrain-system"
	// keepAnnotation is what the chart adds to CRDs with crds.keep, which the base cannot say.
	keepAnnotation = "helm.sh/resource-policy"
)

// kubeVersion is the Kubernetes the chart is rendered for (the local cluster's minor).
var kubeVersion = &chartutil.KubeVersion{Version: "v1.33.0", Major: "1", Minor: "33"}

// objects decodes a stream of YAML documents into objects keyed "Kind namespace/name".
func objects(t *testing.T, what string, stream []byte) map[string]*unstructured.Unstructured {
	t.Helper()
	out := map[string]*unstructured.Unstructured{}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(stream), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if m == nil {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		key := fmt.Sprintf("%s %s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
		if _, dup := out[key]; dup {
			t.Fatalf("%s renders %s twice", what, key)
		}
		out[key] = u
	}
}

// kustomize builds a kustomization directory as `kubectl kustomize` does.
func kustomize(t *testing.T, dir string) map[string]*unstructured.Unstructured {
	t.Helper()
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	y, err := res.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	return objects(t, "kustomize build "+dir, y)
}

// render renders the chart as `helm template finegrain charts/finegrain -n ns --set ...` does,
// CRDs included.
func render(t *testing.T, ns string, values map[string]any) map[string]*unstructured.Unstructured {
	t.Helper()
	return renderFrom(t, chartDir, ns, values)
}

// renderFrom renders the chart at path, a directory or a packaged chart, with Helm's template
// engine as `helm template` does, and parses every template's output.
func renderFrom(t *testing.T, path, ns string, values map[string]any) map[string]*unstructured.Unstructured {
	t.Helper()
	chrt, err := loader.Load(path)
	if err != nil {
		t.Fatalf("load the chart %s: %v", path, err)
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = *kubeVersion
	vals, err := chartutil.ToRenderValues(chrt, values, chartutil.ReleaseOptions{Name: "finegrain", Namespace: ns, IsInstall: true}, caps)
	if err != nil {
		t.Fatalf("values %v: %v", values, err)
	}
	out, err := engine.Render(chrt, vals)
	if err != nil {
		t.Fatalf("helm template with %v: %v", values, err)
	}
	names := make([]string, 0, len(out))
	for name := range out {
		names = append(names, name)
	}
	slices.Sort(names)
	var stream bytes.Buffer
	for _, name := range names {
		fmt.Fprintf(&stream, "---\n# Source: %s\n%s\n", name, out[name])
	}
	return objects(t, "helm template", stream.Bytes())
}

func keys(m map[string]*unstructured.Unstructured) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestChartLints runs `helm lint` (strict: warnings fail) with the default values and with every
// switch turned.
func TestChartLints(t *testing.T) {
	for _, values := range []map[string]any{
		nil,
		{"namespace": map[string]any{"create": true}, "serviceMonitor": map[string]any{"enabled": true},
			"crds": map[string]any{"install": false}, "nodeagent": map[string]any{"metrics": map[string]any{"enabled": false}, "slurmConfinement": true}},
	} {
		res := lint.AllWithKubeVersion(chartDir, values, namespace, kubeVersion)
		for _, msg := range res.Messages {
			if msg.Severity > support.InfoSev {
				t.Errorf("helm lint --strict with %v: %s", values, msg)
			}
		}
	}
}

// TestChartEqualsKustomizeBase: `helm template` with the default values renders what `kubectl
// kustomize daemonset/` builds, object for object and field for field, except the Namespace
// (helm install --create-namespace makes it; namespace.create renders it) and the CRDs'
// keep annotation.
func TestChartEqualsKustomizeBase(t *testing.T) {
	want := kustomize(t, baseDir)
	got := render(t, namespace, nil)
	delete(want, "Namespace /"+namespace)
	for _, u := range got {
		if u.GetKind() != "CustomResourceDefinition" {
			continue
		}
		a := u.GetAnnotations()
		if a[keepAnnotation] != "keep" {
			t.Errorf("CRD %s lacks %s: keep", u.GetName(), keepAnnotation)
		}
		delete(a, keepAnnotation)
		if len(a) == 0 {
			a = nil
		}
		u.SetAnnotations(a)
	}
	if d := cmp.Diff(keys(want), keys(got)); d != "" {
		t.Fatalf("objects of kustomize build daemonset/ (-) and helm template (+) differ; a file added to the base's resources that has values needs a template in charts/finegrain/templates:\n%s", d)
	}
	for k, w := range want {
		if d := cmp.Diff(w.Object, got[k].Object, celSpaces); d != "" {
			t.Errorf("%s: kustomize build daemonset/ (-) and helm template (+) differ:\n%s", k, d)
		}
	}
	withNamespace := render(t, namespace, map[string]any{"namespace": map[string]any{"create": true}})
	if d := cmp.Diff(kustomize(t, baseDir)["Namespace /"+namespace].Object, withNamespace["Namespace /"+namespace].Object); d != "" {
		t.Errorf("namespace.create: the Namespace differs from the base's (-want +got):\n%s", d)
	}
}

// celSpaces compares CEL expressions (admission policies' expression and messageExpression) up to
// whitespace, which CEL ignores between tokens. kustomize's YAML library reads a folded scalar
// (">-") with more-indented lines with one line break more than the YAML specification and Helm's
// library do, so `kubectl apply -k` and `helm install` send the same expression with different
// blank lines.
var celSpaces = cmp.FilterPath(func(p cmp.Path) bool {
	if mi, ok := p.Last().(cmp.MapIndex); ok {
		k := mi.Key().String()
		return k == "expression" || k == "messageExpression"
	}
	return false
}, cmp.Comparer(func(a, b any) bool {
	as, aok := a.(string)
	bs, bok := b.(string)
	return aok && bok && strings.Join(strings.Fields(as), " ") == strings.Join(strings.Fields(bs), " ")
}))

// `helm package` packs the base's files that the chart reads through its link, so that the
// packaged chart renders the same objects as the directory.
func TestPackagedChartRendersTheSame(t *testing.T) {
	chrt, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	archive, err := chartutil.Save(chrt, t.TempDir())
	if err != nil {
		t.Fatalf("package the chart: %v", err)
	}
	if d := cmp.Diff(render(t, namespace, nil), renderFrom(t, archive, namespace, nil)); d != "" {
		t.Errorf("the chart's directory (-) and its package %s (+) render differently:\n%s", archive, d)
	}
}

// container returns the first container of a workload's pod template.
func container(t *testing.T, u *unstructured.Unstructured) map[string]any {
	t.Helper()
	cs, _, err := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	if err != nil || len(cs) == 0 {
		t.Fatalf("%s %s has no containers (%v)", u.GetKind(), u.GetName(), err)
	}
	return cs[0].(map[string]any)
}

func args(t *testing.T, u *unstructured.Unstructured) []string {
	t.Helper()
	var out []string
	for _, a := range container(t, u)["args"].([]any) {
		out = append(out, a.(string))
	}
	return out
}

// Each value does what values.yaml says.
func TestChartValues(t *testing.T) {
	const ns = "hpc-system"
	got := render(t, ns, map[string]any{
		"image": map[string]any{"repository": "registry.example/finegrain", "tag": "v1.2.3", "pullPolicy": "IfNotPresent"},
		"crds":  map[string]any{"install": false},
		"nodeagent": map[string]any{
			"flags":             map[string]any{"reserved-cpus": "0-1", "cgroup-driver": "systemd"},
			"metrics":           map[string]any{"enabled": false},
			"resources":         map[string]any{"requests": map[string]any{"cpu": "50m"}},
			"nodeSelector":      map[string]any{"hpc": "true"},
			"priorityClassName": "agent-class",
		},
		"placer": map[string]any{
			"replicas": 2, "flags": map[string]any{"gang-timeout": "10m"},
			"tolerations":         []any{map[string]any{"key": "control", "operator": "Exists"}},
			"podDisruptionBudget": map[string]any{"enabled": false},
		},
		"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prom"}},
	})
	for k, u := range got {
		if u.GetKind() == "CustomResourceDefinition" {
			t.Errorf("crds.install false renders %s", k)
		}
		if u.GetNamespace() != "" && u.GetNamespace() != ns {
			t.Errorf("%s is not in the release's namespace %s", k, ns)
		}
	}
	for _, k := range []string{"Service " + ns + "/finegrain-nodeagent-metrics", "PodDisruptionBudget " + ns + "/finegrain-placer"} {
		if _, ok := got[k]; ok {
			t.Errorf("%s rendered although switched off", k)
		}
	}

	agent := got["DaemonSet "+ns+"/finegrain-nodeagent"]
	c := container(t, agent)
	if c["image"] != "registry.example/finegrain:v1.2.3" || c["imagePullPolicy"] != "IfNotPresent" {
		t.Errorf("agent image %v pull policy %v", c["image"], c["imagePullPolicy"])
	}
	a := args(t, agent)
	if !slices.Contains(a, "--cgroup-driver=systemd") || slices.Contains(a, "--cgroup-driver=cgroupfs") || a[len(a)-1] != "--reserved-cpus=0-1" {
		t.Errorf("agent args %v: want --cgroup-driver replaced in place and --reserved-cpus added last", a)
	}
	if slices.ContainsFunc(a, func(s string) bool { return strings.HasPrefix(s, "--metrics-address") }) || c["ports"] != nil {
		t.Errorf("metrics off: agent args %v ports %v, want neither --metrics-address nor a port", a, c["ports"])
	}
	if cpu, _, _ := unstructured.NestedString(c, "resources", "requests", "cpu"); cpu != "50m" {
		t.Errorf("agent CPU request %q, want 50m", cpu)
	}
	if sel, _, _ := unstructured.NestedStringMap(agent.Object, "spec", "template", "spec", "nodeSelector"); sel["hpc"] != "true" {
		t.Errorf("agent nodeSelector %v", sel)
	}
	if pc, _, _ := unstructured.NestedString(agent.Object, "spec", "template", "spec", "priorityClassName"); pc != "agent-class" {
		t.Errorf("agent priority class %q", pc)
	}

	placer := got["Deployment "+ns+"/finegrain-placer"]
	if r, _, _ := unstructured.NestedFieldNoCopy(placer.Object, "spec", "replicas"); fmt.Sprint(r) != "2" {
		t.Errorf("placer replicas %v, want 2", r)
	}
	if a := args(t, placer); a[len(a)-1] != "--gang-timeout=10m" {
		t.Errorf("placer args %v, want --gang-timeout=10m added", a)
	}
	if tol, _, _ := unstructured.NestedSlice(placer.Object, "spec", "template", "spec", "tolerations"); len(tol) != 1 {
		t.Errorf("placer tolerations %v", tol)
	}

	// The admission policies name the release namespace's service accounts.
	for _, p := range []string{"finegrain-placer-pods", "finegrain-nrt-own-node"} {
		policy := got["ValidatingAdmissionPolicy /"+p]
		conds, _, _ := unstructured.NestedSlice(policy.Object, "spec", "matchConditions")
		if len(conds) != 1 || !strings.Contains(conds[0].(map[string]any)["expression"].(string), "system:serviceaccount:"+ns+":") {
			t.Errorf("policy %s conditions %v do not name the service accounts of %s", p, conds, ns)
		}
	}

	// The ServiceMonitors are daemonset/monitoring's, with the extra label.
	monitors := kustomize(t, baseDir+"/monitoring")
	for k, m := range monitors {
		k = strings.Replace(k, namespace, ns, 1)
		g, ok := got[k]
		if !ok {
			t.Errorf("serviceMonitor.enabled does not render %s", k)
			continue
		}
		if g.GetLabels()["release"] != "prom" {
			t.Errorf("%s labels %v lack release=prom", k, g.GetLabels())
		}
		if d := cmp.Diff(m.Object["spec"], g.Object["spec"]); d != "" {
			t.Errorf("%s: daemonset/monitoring (-) and the chart (+) differ:\n%s", k, d)
		}
	}
}

// nodeagent.slurmConfinement renders the agent's DaemonSet as the base with the component
// daemonset/slurm-confinement: SYS_NICE added, every other capability still dropped.
func TestSlurmConfinementEqualsComponent(t *testing.T) {
	const key = "DaemonSet " + namespace + "/finegrain-nodeagent"
	want := kustomize(t, "testdata/slurm-confinement")[key]
	got := render(t, namespace, map[string]any{"nodeagent": map[string]any{"slurmConfinement": true}})[key]
	if d := cmp.Diff(want.Object, got.Object); d != "" {
		t.Errorf("%s: the base with daemonset/slurm-confinement (-) and nodeagent.slurmConfinement (+) differ:\n%s", key, d)
	}
	caps, _, _ := unstructured.NestedFieldNoCopy(container(t, got), "securityContext", "capabilities")
	if d := cmp.Diff(map[string]any{"add": []any{"SYS_NICE"}, "drop": []any{"ALL"}}, caps); d != "" {
		t.Errorf("agent capabilities (-want +got):\n%s", d)
	}
	if caps, _, _ := unstructured.NestedFieldNoCopy(container(t, render(t, namespace, nil)[key]), "securityContext", "capabilities"); fmt.Sprint(caps) != "map[drop:[ALL]]" {
		t.Errorf("default agent capabilities %v, want every one dropped and none added", caps)
	}
}
