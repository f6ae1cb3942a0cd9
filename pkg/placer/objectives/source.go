package objectives

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/objective/measure"
)

// The metric of an objective is fetched from inside the placer, so where it may come from is the
// operator's decision, not the objective author's (docs/objectives.md, "Where the loop may
// fetch from"):
//   - a pods source is fetched at the IPs the API server reports for the Ready pods the target
//     controls, on the objective's port and path: the author chooses no host;
//   - a query source only from a base URL the placer's --objective-query-urls lists: the URL
//     must have its scheme and host and lie at or under its path. None is listed by default.

// allowedURL is one entry of Options.AllowedQueryURLs.
type allowedURL struct{ scheme, host, path string }

// CheckAllowedQueryURL says what is wrong with an entry of Options.AllowedQueryURLs.
func CheckAllowedQueryURL(raw string) error {
	_, err := parseAllowedURL(raw)
	return err
}

func parseAllowedURL(raw string) (allowedURL, error) {
	a, ok := baseURL(raw)
	if !ok {
		return allowedURL{}, fmt.Errorf("allowed query URL %q: want the http or https base URL of a Prometheus-compatible API, without credentials, query, fragment or dot segments, such as http://prometheus.monitoring:9090", raw)
	}
	return a, nil
}

// baseURL splits an http(s) base URL into scheme, lower-case host and clean path without a
// trailing slash; false for anything else (credentials, a query, a fragment, dot segments).
func baseURL(raw string) (allowedURL, bool) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return allowedURL{}, false
	}
	p := strings.TrimSuffix(u.Path, "/")
	if p != "" && path.Clean(p) != p {
		return allowedURL{}, false
	}
	return allowedURL{scheme: u.Scheme, host: strings.ToLower(u.Host), path: p}, true
}

// parseAllowed reads Options.AllowedQueryURLs.
func parseAllowed(raw []string) ([]allowedURL, error) {
	out := make([]allowedURL, 0, len(raw))
	for _, r := range raw {
		a, err := parseAllowedURL(r)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// queryAllowed says whether an objective may name raw as its query API: it has the scheme and
// host of an allowed URL and lies at or under its path.
func (c *Controller) queryAllowed(raw string) bool {
	u, ok := baseURL(raw)
	if !ok {
		return false
	}
	for _, a := range c.allowed {
		if u.scheme == a.scheme && u.host == a.host && (u.path == a.path || strings.HasPrefix(u.path, a.path+"/")) {
			return true
		}
	}
	return false
}

// sourceNotAllowed is the Valid condition of an objective whose query API is not allowed.
func sourceNotAllowed(obj *v1alpha1.ServiceObjective) string {
	return fmt.Sprintf("the placer may not fetch metric.source.query.url %s: its --objective-query-urls does not list it; "+
		"ask the cluster operator to allow the query API, or read the pods' own endpoint (metric.source.pods); "+
		"the loop leaves %s %s alone until then", obj.Spec.Metric.Source.Query.URL, obj.Spec.TargetRef.Kind, obj.Spec.TargetRef.Name)
}

// scrapeParallelism bounds the pods scraped at once for one objective.
const scrapeParallelism = 8

// errUnresponsive marks a measurement that failed because the service's pods did not answer
// their metric endpoint in time: with AtMost (the worst pod counts) any Ready pod timing out,
// with AtLeast (the sum) every one. The law takes it for a violation (objective.Input.Unresponsive).
var errUnresponsive = errors.New("the service did not answer in time")

// measureMetric reads the objective's metric: from the target's Ready pods, or from its allowed
// query API. It returns NaN with the error when nothing could be read (wrapping errUnresponsive
// when the pods timed out); note says how many pods answered.
func (c *Controller) measureMetric(ctx context.Context, obj *v1alpha1.ServiceObjective, pods []*corev1.Pod, now time.Time) (value float64, note string, err error) {
	src := obj.Spec.Metric.Source
	if q := src.Query; q != nil {
		api, err := measure.NewQueryAPI(q.URL, c.http)
		if err != nil {
			return math.NaN(), "", err
		}
		v, err := api.Instant(ctx, q.Query, now)
		if err != nil {
			return math.NaN(), "", err
		}
		return v, "from " + q.URL, nil
	}
	p := src.Pods
	var urls []string
	for _, pod := range pods {
		if podReady(pod) && pod.Status.PodIP != "" {
			urls = append(urls, measure.PodURL(pod.Status.PodIP, p.Port, p.Path))
		}
	}
	if len(urls) == 0 {
		return math.NaN(), "", fmt.Errorf("no Ready pod of %s %s to read %s from", obj.Spec.TargetRef.Kind, obj.Spec.TargetRef.Name, p.Metric)
	}
	values, errs := make([]float64, len(urls)), make([]error, len(urls))
	var wg sync.WaitGroup
	slots := make(chan struct{}, scrapeParallelism)
	for i, u := range urls {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			values[i], errs[i] = measure.ScrapePod(ctx, c.http, u, p.Metric)
		}()
	}
	wg.Wait()
	var got []float64
	var failed, timedOut []error
	for i := range urls {
		if errs[i] != nil {
			failed = append(failed, errs[i])
			if isTimeout(errs[i]) {
				timedOut = append(timedOut, errs[i])
			}
			continue
		}
		got = append(got, values[i])
	}
	atLeast := obj.Spec.Metric.Direction == v1alpha1.AtLeast
	if len(timedOut) > 0 && (!atLeast || len(timedOut) == len(urls)) {
		return math.NaN(), "", fmt.Errorf("%w: %d of %d Ready pods did not answer %s within the scrape timeout: %w",
			errUnresponsive, len(timedOut), len(urls), p.Metric, timedOut[0])
	}
	if len(got) == 0 {
		return math.NaN(), "", fmt.Errorf("no pod answered: %w", errors.Join(failed...))
	}
	v, _ := measure.Combine(got, atLeast)
	note = fmt.Sprintf("from %d of %d Ready pods", len(got), len(urls))
	if len(failed) > 0 {
		note += fmt.Sprintf(" (%v)", failed[0])
	}
	return v, note, nil
}

// isTimeout says whether a scrape failed for want of an answer in time (the client's timeout or
// the period's deadline), as opposed to a refused connection or a bad answer.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
