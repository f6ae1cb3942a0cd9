package measure

import (
	"fmt"
	"io"
	"math"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// ParseGauge reads Prometheus text exposition and returns the value of metric, which must be a
// gauge (or untyped) with exactly one series: an objective reads one number.
func ParseGauge(r io.Reader, metric string) (float64, error) {
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return 0, fmt.Errorf("not Prometheus text exposition: %w", err)
	}
	f, ok := families[metric]
	if !ok {
		return 0, fmt.Errorf("no metric %s among the %d exposed; check the objective's metric.source.pods.metric", metric, len(families))
	}
	var v float64
	switch f.GetType() {
	case dto.MetricType_GAUGE, dto.MetricType_UNTYPED:
	default:
		return 0, fmt.Errorf("metric %s is a %s, want a gauge (a latency quantile or a rate): expose one, or use a query source",
			metric, f.GetType())
	}
	if n := len(f.GetMetric()); n != 1 {
		return 0, fmt.Errorf("metric %s has %d series, want one: expose the objective's value as one series, or use a query source", metric, n)
	}
	m := f.GetMetric()[0]
	if f.GetType() == dto.MetricType_GAUGE {
		v = m.GetGauge().GetValue()
	} else {
		v = m.GetUntyped().GetValue()
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("metric %s is %v, not a measurement", metric, v)
	}
	return v, nil
}
