// Package measure reads the metric of a service objective: a gauge from the Prometheus text
// endpoints of the service's pods, or one sample of an instant query to a Prometheus-compatible
// API. It does the HTTP and the parsing only: the pods' addresses come from the caller (pod IPs
// from the API server), the port, path, metric and URL from a validated objective, and the
// decision from pkg/objective.
package measure

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"time"
)

// MaxBodyBytes bounds what one answer may hold; a longer one is an error, never read into
// memory.
const MaxBodyBytes = 4 << 20

// DefaultTimeout bounds one request.
const DefaultTimeout = 5 * time.Second

// ErrTooLarge is returned for an answer longer than MaxBodyBytes.
var ErrTooLarge = fmt.Errorf("answer longer than %d bytes", MaxBodyBytes)

// NewClient is the HTTP client for both sources: DefaultTimeout per request, answers cut at
// MaxBodyBytes, no redirects followed (an endpoint named in an objective must answer itself).
func NewClient() *http.Client {
	return &http.Client{
		Timeout:   DefaultTimeout,
		Transport: limitBody{http.DefaultTransport},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// PodURL is the metrics URL of a pod at ip (IPv4 or IPv6) on port and path.
func PodURL(ip string, port int32, path string) string {
	return "http://" + net.JoinHostPort(ip, strconv.Itoa(int(port))) + path
}

// ScrapePod fetches url, a pod's Prometheus text endpoint, and returns the value of the gauge
// named metric.
func ScrapePod(ctx context.Context, client *http.Client, url, metric string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, fmt.Errorf("scrape %s: %w", url, err)
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("scrape %s: status %s; the objective's port and path must serve Prometheus text", url, resp.Status)
	}
	v, err := ParseGauge(resp.Body, metric)
	if err != nil {
		return 0, fmt.Errorf("scrape %s: %w", url, err)
	}
	return v, nil
}

// Combine folds the pods' values into the service's: the worst pod (the largest value) for an
// AtMost metric, the sum for an AtLeast one.
func Combine(values []float64, atLeast bool) (float64, error) {
	if len(values) == 0 {
		return math.NaN(), errors.New("no pod answered")
	}
	out := values[0]
	for _, v := range values[1:] {
		if atLeast {
			out += v
		} else {
			out = max(out, v)
		}
	}
	return out, nil
}

// limitBody cuts every answer's body at MaxBodyBytes.
type limitBody struct{ next http.RoundTripper }

func (l limitBody) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &limitedBody{rc: resp.Body, left: MaxBodyBytes}
	return resp, nil
}

type limitedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left == 0 {
		// Every allowed byte is read: one more is too many.
		var one [1]byte
		if n, err := b.rc.Read(one[:]); n == 0 {
			return 0, err
		}
		return 0, ErrTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }
