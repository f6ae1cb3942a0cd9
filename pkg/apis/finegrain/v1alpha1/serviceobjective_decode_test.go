package v1alpha1

import (
	"errors"
	"os"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const goodObjective = `apiVersion: finegrain.dev/v1alpha1
kind: ServiceObjective
metadata:
  name: web-p99
  namespace: shop
spec:
  targetRef: {kind: Deployment, name: web}
  metric:
    target: 20m
    direction: AtMost
    source:
      pods: {port: 8080, metric: http_p99_seconds}
  podBounds:
    max: {cpu: "4", memory: 4Gi, ioBandwidth: 100M}
  replicas: {max: 6}
`

func TestDecodeServiceObjectiveIsDefaulted(t *testing.T) {
	obj, err := DecodeServiceObjective([]byte(goodObjective), "so.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := obj.Spec
	if s.PeriodSeconds != 10 || s.ShrinkMarginPercent != 20 || s.ScaleDownStabilizationSeconds != 300 || s.Replicas.Min != 1 || s.Metric.Source.Pods.Path != "/metrics" {
		t.Errorf("defaults: %+v", s)
	}
	// The thesis's starting size is the default minimum.
	if lo := s.PodBounds.Min; lo.CPU.String() != "1" || lo.Memory.String() != "1Gi" || lo.IOBandwidth.String() != "10M" {
		t.Errorf("podBounds.min = cpu %s memory %s io %s, want 1, 1Gi, 10M", &lo.CPU, &lo.Memory, &lo.IOBandwidth)
	}
	if got := s.Metric.Target.AsApproximateFloat64(); got != 0.020 {
		t.Errorf("target = %v, want 0.020", got)
	}
	// A maximum below the starting size is the default minimum.
	small, err := DecodeServiceObjective([]byte(strings.Replace(goodObjective, `max: {cpu: "4", memory: 4Gi`, `max: {cpu: 500m, memory: 512Mi`, 1)), "so.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if lo := small.Spec.PodBounds.Min; lo.CPU.String() != "500m" || lo.Memory.String() != "512Mi" {
		t.Errorf("podBounds.min = cpu %s memory %s, want the maxima 500m and 512Mi", &lo.CPU, &lo.Memory)
	}
	// Defaulting is idempotent.
	again := obj.Spec
	SetServiceObjectiveDefaults(&again)
	if again.PodBounds.Min.CPU.Cmp(s.PodBounds.Min.CPU) != 0 || again.PeriodSeconds != s.PeriodSeconds {
		t.Errorf("defaulting twice changed the spec: %+v", again)
	}
}

func TestExampleServiceObjectiveDecodes(t *testing.T) {
	data, err := os.ReadFile("../../../../daemonset/placer/example-serviceobjective.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeServiceObjective(data, "example-serviceobjective.yaml"); err != nil {
		t.Fatal(err)
	}
}

func TestDecodeBadServiceObjectives(t *testing.T) {
	const query = "source:\n      query: {url: http://prom:9090, query: 'histogram_quantile(0.99, rate(x[1m]))'}"
	tests := []struct {
		name, old, new string
		want           string
	}{
		{"unknown field", "  replicas: {max: 6}", "  replica: {max: 6}", `unknown field "spec.replica"`},
		{"wrong kind", "kind: ServiceObjective", "kind: HPCJob", `kind "HPCJob", want apiVersion "finegrain.dev/v1alpha1" kind "ServiceObjective"`},
		{"target kind", "kind: Deployment", "kind: DaemonSet", `spec.targetRef.kind: Unsupported value: "DaemonSet": supported values: "Deployment", "StatefulSet"`},
		{"target name", "name: web}", "name: Web_1}", `spec.targetRef.name: Invalid value: "Web_1"`},
		{"no target name", "name: web}", "name: \"\"}", `spec.targetRef.name: Required value`},
		{"zero target", "target: 20m", "target: \"0\"", `spec.metric.target: Invalid value: "0": must be positive`},
		{"negative target", "target: 20m", "target: -1", `spec.metric.target: Invalid value: "-1"`},
		{"direction", "direction: AtMost", "direction: below", `spec.metric.direction: Unsupported value: "below"`},
		{"no source", "source:\n      pods: {port: 8080, metric: http_p99_seconds}", "source: {}", `spec.metric.source: Invalid value: "": set exactly one of pods`},
		{"two sources", "pods: {port: 8080, metric: http_p99_seconds}", "pods: {port: 8080, metric: m}\n      query: {url: http://p:9090, query: up}", "set exactly one of pods"},
		{"port", "port: 8080", "port: 70000", `spec.metric.source.pods.port: Invalid value: 70000`},
		{"path", "port: 8080,", "port: 8080, path: metrics,", `spec.metric.source.pods.path: Invalid value: "metrics"`},
		{"metric name", "metric: http_p99_seconds", "metric: http-p99", `spec.metric.source.pods.metric: Invalid value: "http-p99": must be a Prometheus metric name`},
		{"query url scheme", "source:\n      pods: {port: 8080, metric: http_p99_seconds}", strings.Replace(query, "http://prom:9090", "file:///etc/passwd", 1), `spec.metric.source.query.url: Invalid value: "file:///etc/passwd": must be the http or https base URL`},
		{"query url credentials", "source:\n      pods: {port: 8080, metric: http_p99_seconds}", strings.Replace(query, "http://prom", "http://u:p@prom", 1), "must not carry credentials"},
		{"query url query", "source:\n      pods: {port: 8080, metric: http_p99_seconds}", strings.Replace(query, "http://prom:9090", "'http://prom:9090/?x=1'", 1), "must not have a query or fragment"},
		{"empty query", "source:\n      pods: {port: 8080, metric: http_p99_seconds}", strings.Replace(query, "'histogram_quantile(0.99, rate(x[1m]))'", "''", 1), `spec.metric.source.query.query: Required value`},
		{"missing max cpu", `max: {cpu: "4", `, `max: {`, `spec.podBounds.max.cpu: Required value`},
		{"missing max io", `, ioBandwidth: 100M}`, `}`, `spec.podBounds.max.ioBandwidth: Required value`},
		{"min above max", "  podBounds:\n", "  podBounds:\n    min: {memory: 8Gi}\n", `spec.podBounds.min.memory: Invalid value: "8Gi": must be at most podBounds.max.memory (4Gi)`},
		{"negative min", "  podBounds:\n", "  podBounds:\n    min: {cpu: -1}\n", `spec.podBounds.min.cpu: Invalid value: "-1": must be positive`},
		{"tiny cpu", "  podBounds:\n", "  podBounds:\n    min: {cpu: 100u}\n", `must be at least 1m`},
		{"huge cpu", `cpu: "4"`, `cpu: "5000"`, `spec.podBounds.max.cpu: Invalid value: "5k": must be at most 1024 cores`},
		{"huge memory", `memory: 4Gi`, `memory: 2Ei`, `spec.podBounds.max.memory: Invalid value: "2Ei": must be at most 1Pi`},
		{"huge io", `ioBandwidth: 100M`, `ioBandwidth: 900E`, `spec.podBounds.max.ioBandwidth: Invalid value: "900E": must be at most 1P`},
		{"replicas min", "replicas: {max: 6}", "replicas: {min: -1, max: 6}", `spec.replicas.min: Invalid value: -1`},
		{"replicas max", "replicas: {max: 6}", "replicas: {min: 3, max: 2}", `spec.replicas.max: Invalid value: 2: must be between replicas.min (3) and 10000 pods`},
		{"no replicas max", "replicas: {max: 6}", "replicas: {min: 2}", `spec.replicas.max: Invalid value: 0`},
		{"period", "  replicas: {max: 6}", "  replicas: {max: 6}\n  periodSeconds: 7200", `spec.periodSeconds: Invalid value: 7200: must be between 1 and 3600 seconds`},
		{"margin", "  replicas: {max: 6}", "  replicas: {max: 6}\n  shrinkMarginPercent: 100", `spec.shrinkMarginPercent: Invalid value: 100: must be between 1 and 99 percent`},
		{"stabilisation", "  replicas: {max: 6}", "  replicas: {max: 6}\n  scaleDownStabilizationSeconds: -5", `spec.scaleDownStabilizationSeconds: Invalid value: -5: must be between 1 and 108000 seconds (omit it for 30 periods)`},
		{"bad name", "  name: web-p99", "  name: Web_P99", `metadata.name: Invalid value: "Web_P99"`},
		{"not yaml", "kind: ServiceObjective", "kind: [ServiceObjective", "not valid YAML or JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(goodObjective, tc.old) {
				t.Fatalf("fixture lacks %q", tc.old)
			}
			_, err := DecodeServiceObjective([]byte(strings.Replace(goodObjective, tc.old, tc.new, 1)), "so.yaml")
			if err == nil {
				t.Fatal("DecodeServiceObjective accepted a bad objective")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q\ndoes not contain %q", err, tc.want)
			}
			if !strings.Contains(err.Error(), "so.yaml") {
				t.Errorf("error %q does not name its source", err)
			}
		})
	}
}

func TestServiceObjectiveValidity(t *testing.T) {
	bad := strings.Replace(strings.Replace(goodObjective, "direction: AtMost", "direction: below", 1), "port: 8080", "port: 0", 1)
	obj, err := DecodeServiceObjective([]byte(bad), "so.yaml")
	var ie *InvalidError
	if !errors.As(err, &ie) {
		t.Fatalf("error %v is not an *InvalidError", err)
	}
	if len(ie.Errors) != 2 || ie.Object != "shop/web-p99" {
		t.Errorf("got %d errors for %s, want 2 for shop/web-p99: %v", len(ie.Errors), ie.Object, ie.Errors)
	}
	obj.Generation = 3
	c := ServiceObjectiveValidity(obj, ie.Errors)
	if c.Type != ObjectiveValid || c.Status != metav1.ConditionFalse || c.Reason != "InvalidSpec" || c.ObservedGeneration != 3 ||
		!strings.Contains(c.Message, "leaves Deployment web alone") || !strings.Contains(c.Message, "spec.metric.direction") ||
		!strings.Contains(c.Message, "spec.metric.source.pods.port") {
		t.Errorf("condition %+v", c)
	}
	good, err := DecodeServiceObjective([]byte(goodObjective), "so.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c := ServiceObjectiveValidity(good, nil); c.Status != metav1.ConditionTrue || c.Reason != "Valid" {
		t.Errorf("condition of a valid objective %+v", c)
	}
}

func TestServiceObjectiveStatusDeepCopy(t *testing.T) {
	obj, err := DecodeServiceObjective([]byte(goodObjective), "so.yaml")
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	s := ServiceObjectiveStatus{
		PodSize: &PodSize{CPU: obj.Spec.PodBounds.Max.CPU}, LastMeasurement: &obj.Spec.Metric.Target,
		LastResizeTime: &now, Conditions: []metav1.Condition{ServiceObjectiveValidity(obj, nil)},
	}
	c := s.DeepCopy()
	c.PodSize.CPU.Add(obj.Spec.PodBounds.Max.CPU)
	c.LastMeasurement.Add(obj.Spec.Metric.Target)
	c.LastResizeTime.Time = c.LastResizeTime.AddDate(1, 0, 0)
	c.Conditions[0].Reason = "Changed"
	if s.PodSize.CPU.String() != "4" || s.LastMeasurement.String() != "20m" || !s.LastResizeTime.Equal(&now) || s.Conditions[0].Reason != "Valid" {
		t.Errorf("editing the copy changed the original: %+v", s)
	}
}

func FuzzDecodeServiceObjective(f *testing.F) {
	f.Add([]byte(goodObjective))
	f.Add([]byte(strings.Replace(goodObjective, "pods: {port: 8080, metric: http_p99_seconds}", "query: {url: 'https://p:9090/prom', query: 'sum(rate(x[1m]))'}", 1)))
	f.Add([]byte(strings.Replace(goodObjective, "  podBounds:\n", "  podBounds:\n    min: {cpu: 100m, memory: 64Mi, ioBandwidth: 1M}\n", 1)))
	f.Add([]byte(`{"apiVersion":"finegrain.dev/v1alpha1","kind":"ServiceObjective","metadata":{"name":"x"},"spec":{"targetRef":{"kind":"StatefulSet","name":"db"},"metric":{"target":"2k","direction":"AtLeast","source":{"pods":{"port":9100,"metric":"rps"}}},"podBounds":{"max":{"cpu":2,"memory":"1Gi","ioBandwidth":"1G"}},"replicas":{"max":3}}}`))
	f.Add([]byte("kind: ServiceObjective\nspec: {replicas: {max: -1}}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		obj, err := DecodeServiceObjective(data, "fuzz.yaml")
		if err != nil {
			return
		}
		if errs := ValidateServiceObjective(obj); len(errs) > 0 {
			t.Fatalf("DecodeServiceObjective accepted an objective Validate rejects: %v", errs)
		}
		b := obj.Spec.PodBounds
		if b.Min.CPU.Cmp(b.Max.CPU) > 0 || b.Min.Memory.Sign() <= 0 || obj.Spec.Replicas.Min > obj.Spec.Replicas.Max ||
			obj.Spec.Metric.Target.Sign() <= 0 {
			t.Fatalf("accepted objective out of its own bounds: %+v", obj.Spec)
		}
	})
}
