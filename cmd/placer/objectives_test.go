package main

import (
	"slices"
	"strings"
	"testing"
)

// --objective-query-urls: none by default, comma-separated and repeatable, and an entry that is
// not an http(s) base URL is refused when the flags are parsed.
func TestObjectiveQueryURLsFlag(t *testing.T) {
	if o, _ := parseRun(t); len(o.placer.Objectives.AllowedQueryURLs) != 0 {
		t.Errorf("allowed by default: %q", o.placer.Objectives.AllowedQueryURLs)
	}
	o, _ := parseRun(t, "--objective-query-urls=http://prometheus.monitoring:9090,https://thanos.example/api", "--objective-query-urls", "http://vm:8428")
	want := []string{"http://prometheus.monitoring:9090", "https://thanos.example/api", "http://vm:8428"}
	if got := o.placer.Objectives.AllowedQueryURLs; !slices.Equal(got, want) {
		t.Errorf("parsed %q, want %q", got, want)
	}
	code, _, errOut := placerCmd("run", "--objective-query-urls", "http://u:p@prometheus:9090")
	if want := `placer run: invalid argument "http://u:p@prometheus:9090" for "--objective-query-urls" flag: allowed query URL`; code != 2 || !strings.Contains(errOut, want) {
		t.Errorf("credentials in an allowed URL: exit %d, %q", code, errOut)
	}
}
