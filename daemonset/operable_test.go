package daemonset

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// applied fails unless kustomization.yaml applies every file.
func applied(t *testing.T, files ...string) {
	t.Helper()
	kustomization, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !strings.Contains(string(kustomization), "  - "+f+"\n") {
			t.Errorf("kustomization.yaml does not apply %s", f)
		}
	}
}

// containerPort returns the port of the container's named port, or fails.
func containerPort(t *testing.T, c corev1.Container, name string) int32 {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	t.Fatalf("container %s has no port named %s", c.Name, name)
	return 0
}

// checkMetricsService checks that the Service of file selects the pods of tmpl and leads to their
// metrics port, which is want, and that Prometheus is told so.
func checkMetricsService(t *testing.T, file string, tmpl corev1.PodTemplateSpec, want int32) {
	t.Helper()
	svc := as[corev1.Service](t, objects(t, file)[0])
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(tmpl.Labels)) {
		t.Errorf("%s: selector %v does not select the pods labelled %v", file, svc.Spec.Selector, tmpl.Labels)
	}
	if got := containerPort(t, tmpl.Spec.Containers[0], "metrics"); got != want {
		t.Errorf("%s: the pods' metrics port is %d, want %d", file, got, want)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "metrics" || svc.Spec.Ports[0].Port != want ||
		svc.Spec.Ports[0].TargetPort != intstr.FromString("metrics") {
		t.Errorf("%s: ports %+v, want metrics %d to the pods' port named metrics", file, svc.Spec.Ports, want)
	}
	if svc.Annotations["prometheus.io/scrape"] != "true" || svc.Annotations["prometheus.io/port"] != fmt.Sprint(want) {
		t.Errorf("%s: annotations %v do not tell Prometheus to scrape port %d", file, svc.Annotations, want)
	}
}

// The agent's metrics reach a cluster's Prometheus through a Service, on an address of their own
// (the inspection endpoint stays on loopback); both workloads run under the runtime's default
// seccomp profile.
func TestAgentMetricsReachableAndSeccomp(t *testing.T) {
	applied(t, "nodeagent/service.yaml", "placer/service.yaml")
	ds := as[appsv1.DaemonSet](t, objects(t, "nodeagent/daemonset.yaml")[0])
	agentContainer := ds.Spec.Template.Spec.Containers[0]
	if !slices.Contains(agentContainer.Args, "--metrics-address=:9721") || !slices.Contains(agentContainer.Args, "--inspect-address=127.0.0.1:9720") {
		t.Errorf("agent args %v: want metrics on :9721 and the inspection endpoint on loopback", agentContainer.Args)
	}
	checkMetricsService(t, "nodeagent/service.yaml", ds.Spec.Template, 9721)
	placer := as[appsv1.Deployment](t, objects(t, "placer/deployment.yaml")[0])
	checkMetricsService(t, "placer/service.yaml", placer.Spec.Template, 10261)

	for name, spec := range map[string]corev1.PodSpec{"agent": ds.Spec.Template.Spec, "placer": placer.Spec.Template.Spec} {
		sc := spec.SecurityContext
		if sc == nil || sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("the %s's pod security context %+v, want seccomp RuntimeDefault", name, sc)
		}
		for _, c := range spec.Containers {
			if c.SecurityContext != nil && c.SecurityContext.SeccompProfile != nil {
				t.Errorf("the %s's container %s overrides the pod's seccomp profile with %+v", name, c.Name, c.SecurityContext.SeccompProfile)
			}
		}
	}
}

// The placer has a readiness probe on /readyz, kube-scheduler's priority class, and a
// PodDisruptionBudget that never blocks a drain of its one replica.
func TestPlacerReadinessPriorityAndDisruption(t *testing.T) {
	applied(t, "placer/pdb.yaml")
	placer := as[appsv1.Deployment](t, objects(t, "placer/deployment.yaml")[0])
	spec := placer.Spec.Template.Spec
	if spec.PriorityClassName != "system-cluster-critical" {
		t.Errorf("placer priority class %q, want system-cluster-critical", spec.PriorityClassName)
	}
	c := spec.Containers[0]
	metrics := containerPort(t, c, "metrics")
	for probe, want := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != want || probe.HTTPGet.Port.IntVal != metrics {
			t.Errorf("placer probe %+v, want GET %s on port %d", probe, want, metrics)
		}
	}
	pdb := as[policyv1.PodDisruptionBudget](t, objects(t, "placer/pdb.yaml")[0])
	if pdb.Namespace != placer.Namespace || pdb.Spec.Selector == nil || !labels.SelectorFromSet(pdb.Spec.Selector.MatchLabels).Matches(labels.Set(placer.Spec.Template.Labels)) {
		t.Errorf("PodDisruptionBudget %s/%s selects %v, not the placer's pods %v", pdb.Namespace, pdb.Name, pdb.Spec.Selector, placer.Spec.Template.Labels)
	}
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() < 1 || pdb.Spec.MinAvailable != nil {
		t.Errorf("PodDisruptionBudget maxUnavailable %v minAvailable %v: with one replica it must let a drain evict it", pdb.Spec.MaxUnavailable, pdb.Spec.MinAvailable)
	}
}

// The ServiceMonitors are not in the base (clusters without the Prometheus Operator lack their
// CRD) and each selects one metrics Service by its port name.
func TestServiceMonitors(t *testing.T) {
	kustomization, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(kustomization), "monitoring") {
		t.Error("the base applies daemonset/monitoring, whose ServiceMonitor CRD many clusters lack")
	}
	services := map[string]*corev1.Service{}
	for _, f := range []string{"nodeagent/service.yaml", "placer/service.yaml"} {
		svc := as[corev1.Service](t, objects(t, f)[0])
		services[svc.Name] = svc
	}
	monitors := objects(t, "monitoring/servicemonitors.yaml")
	if len(monitors) != len(services) {
		t.Fatalf("%d ServiceMonitors for %d metrics Services", len(monitors), len(services))
	}
	for _, m := range monitors {
		if m.GetKind() != "ServiceMonitor" || m.GetAPIVersion() != "monitoring.coreos.com/v1" || m.GetNamespace() != "finegrain-system" {
			t.Errorf("%s %s/%s, want monitoring.coreos.com/v1 ServiceMonitors in finegrain-system", m.GetKind(), m.GetNamespace(), m.GetName())
		}
		match, _, _ := unstructured.NestedStringMap(m.Object, "spec", "selector", "matchLabels")
		endpoints, _, _ := unstructured.NestedSlice(m.Object, "spec", "endpoints")
		var selected []string
		for name, svc := range services {
			if labels.SelectorFromSet(match).Matches(labels.Set(svc.Labels)) {
				selected = append(selected, name)
			}
		}
		if len(selected) != 1 || len(endpoints) != 1 || endpoints[0].(map[string]any)["port"] != "metrics" {
			t.Errorf("ServiceMonitor %s selects %v on %v, want one metrics Service on its port metrics", m.GetName(), selected, endpoints)
		}
	}
}
