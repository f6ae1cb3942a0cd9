package measure

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// QueryAPI is a Prometheus-compatible query API (Prometheus, Thanos, Mimir, VictoriaMetrics).
type QueryAPI struct {
	base string
	api  promv1.API
}

// NewQueryAPI is the API at base (the objective's metric.source.query.url) through client.
func NewQueryAPI(base string, client *http.Client) (*QueryAPI, error) {
	c, err := api.NewClient(api.Config{Address: base, Client: client})
	if err != nil {
		return nil, fmt.Errorf("query API %s: %w", base, err)
	}
	return &QueryAPI{base: base, api: promv1.NewAPI(c)}, nil
}

// Instant evaluates query at the time at and returns its one sample.
func (q *QueryAPI) Instant(ctx context.Context, query string, at time.Time) (float64, error) {
	v, _, _, err := q.api.Query(ctx, query, at)
	if err != nil {
		return 0, fmt.Errorf("query %s for %q: %w", q.base, query, err)
	}
	f, err := oneSample(v)
	if err != nil {
		return 0, fmt.Errorf("query %s for %q: %w", q.base, query, err)
	}
	return f, nil
}

// oneSample is the value of a scalar or of a vector of exactly one sample.
func oneSample(v model.Value) (float64, error) {
	var f float64
	switch r := v.(type) {
	case *model.Scalar:
		f = float64(r.Value)
	case model.Vector:
		if len(r) != 1 {
			return 0, fmt.Errorf("the result has %d series, want one: aggregate it (max, sum, histogram_quantile)", len(r))
		}
		f = float64(r[0].Value)
	default:
		return 0, fmt.Errorf("the result is a %s, want a scalar or a vector of one sample", v.Type())
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("the result is %v, not a measurement", f)
	}
	return f, nil
}
