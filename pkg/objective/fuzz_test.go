package objective

import (
	"math"
	"testing"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

// Any objective the API accepts gives a law whose sizes stay within its bounds, whatever it
// measures: PolicyFor's conversions of the quantities (rounded, saturated) keep every minimum at
// most its maximum.
func FuzzDecideFromSpec(f *testing.F) {
	f.Add([]byte(`apiVersion: finegrain.dev/v1alpha1
kind: ServiceObjective
metadata: {name: web}
spec:
  targetRef: {kind: Deployment, name: web}
  metric: {target: 20m, direction: AtMost, source: {pods: {port: 8080, metric: p99}}}
  podBounds: {min: {cpu: 100m, memory: 64Mi, ioBandwidth: 1M}, max: {cpu: "4", memory: 4Gi, ioBandwidth: 100M}}
  replicas: {max: 6}
`), 0.030)
	f.Add([]byte(`apiVersion: finegrain.dev/v1alpha1
kind: ServiceObjective
metadata: {name: rps}
spec:
  targetRef: {kind: StatefulSet, name: db}
  metric: {target: 2k, direction: AtLeast, source: {query: {url: "http://p:9090", query: up}}}
  podBounds: {max: {cpu: 1500u, memory: "0.5", ioBandwidth: 1P}}
  replicas: {min: 3, max: 10000}
  shrinkMarginPercent: 99
`), 0.0)
	f.Fuzz(func(t *testing.T, data []byte, m float64) {
		obj, err := v1alpha1.DecodeServiceObjective(data, "fuzz.yaml")
		if err != nil {
			return
		}
		p := PolicyFor(&obj.Spec)
		cur := Start(p.Bounds)
		if !within(cur, p.Bounds) {
			t.Fatalf("bounds %+v: Start = %v, outside them", p.Bounds, cur)
		}
		var h History
		for _, x := range []float64{m, 2 * m, m / 2, 0, math.NaN(), p.Target * 100, p.Target / 100, p.Target, p.Target, p.Target / 100, p.Target / 100, p.Target / 100} {
			var d Decision
			d, h = Decide(p, h, Input{Current: cur, Measured: x})
			if !within(d.Size, p.Bounds) {
				t.Fatalf("bounds %+v: from %v, measuring %v, decided %v", p.Bounds, cur, x, d.Size)
			}
			cur = d.Size
		}
	})
}
