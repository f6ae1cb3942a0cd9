package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/finegrain-dev/finegrain/bench/internal/pinning"
)

func TestParse(t *testing.T) {
	c, err := parse(nil)
	if err != nil {
		t.Fatalf("defaults rejected: %v", err)
	}
	o := c.cluster
	if c.onCluster || !slices.Equal(o.Scenarios, pinning.AllScenarios) || !slices.Equal(o.Benchmarks, pinning.AllBenchmarks) || o.Repeats != 5 {
		t.Errorf("defaults: on cluster %v, scenarios %v, benchmarks %v, %d repeats", c.onCluster, o.Scenarios, o.Benchmarks, o.Repeats)
	}
	c, err = parse([]string{"-scenarios", " alone, exclusive ,", "-benchmarks", "stream", "-o", "json"})
	if err != nil || !slices.Equal(c.cluster.Scenarios, []string{"alone", "exclusive"}) || c.cluster.Output != "json" {
		t.Errorf("parsed %v %v %q, %v", c.cluster.Scenarios, c.cluster.Benchmarks, c.cluster.Output, err)
	}
	c, err = parse([]string{"-on-cluster", "-worker", "", "-start-lead", "20s", "-kubectl", "/k/kubectl"})
	if err != nil || !c.onCluster || c.cluster.StartLead != 20*time.Second || c.cluster.Kubectl != "/k/kubectl" || c.cluster.Image != "localhost/finegrain-worker:dev" {
		t.Errorf("-on-cluster: %+v, %v", c, err)
	}
	c, err = parse([]string{"-merge", "a, b", "-worker", ""})
	if err != nil || !slices.Equal(c.merge, []string{"a", "b"}) {
		t.Errorf("-merge a,b: %v, %v", c.merge, err)
	}
	for _, bad := range [][]string{
		{"-scenarios", "exclusive"},
		{"-scenarios", "alone,gang"},
		{"-benchmarks", "hpl"},
		{"-repeats", "0"},
		{"-worker", ""},
		{"-on-cluster", "-image", ""},
		{"-on-cluster", "-start-lead", "100ms"},
		{"-on-cluster", "-merge", "a"},
		{"stray"},
	} {
		if _, err := parse(bad); err == nil {
			t.Errorf("parse(%s) succeeded", strings.Join(bad, " "))
		}
	}
}
