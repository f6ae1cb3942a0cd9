package objectives

import (
	"net/url"
	"strings"
	"testing"
)

// Whatever an objective's author writes, an allowed query URL has the scheme and host of an entry
// of --objective-query-urls and lies at or under its path.
func FuzzQueryAllowed(f *testing.F) {
	for _, s := range []string{
		"http://prometheus.monitoring:9090", "http://prometheus.monitoring:9090/sub", "https://thanos.example/api/x",
		"http://prometheus.monitoring:9090@169.254.169.254/", "http://prometheus.monitoring:9090/../x", "http://PROMETHEUS.monitoring:9090",
		"http://prometheus.monitoring:9090%2f@evil", "http://[::1]:9090", "//prometheus.monitoring:9090", "http:prometheus",
	} {
		f.Add(s)
	}
	c := &Controller{}
	var err error
	if c.allowed, err = parseAllowed([]string{"http://prometheus.monitoring:9090", "https://thanos.example/api"}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if !c.queryAllowed(raw) {
			return
		}
		u, err := url.Parse(raw)
		if err != nil || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			t.Fatalf("allowed %q: %v, %+v", raw, err, u)
		}
		host, path := strings.ToLower(u.Host), strings.TrimSuffix(u.Path, "/")
		switch {
		case u.Scheme == "http" && host == "prometheus.monitoring:9090":
		case u.Scheme == "https" && host == "thanos.example" && (path == "/api" || strings.HasPrefix(path, "/api/")):
		default:
			t.Fatalf("allowed %q: scheme %s, host %s, path %s", raw, u.Scheme, host, path)
		}
		if strings.Contains(path, "/../") || strings.HasSuffix(path, "/..") {
			t.Fatalf("allowed %q with a dot segment", raw)
		}
	})
}
