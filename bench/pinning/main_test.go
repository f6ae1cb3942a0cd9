package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/finegrain-dev/finegrain/bench/internal/pinning"
)

func TestParse(t *testing.T) {
	o, _, err := parse(nil)
	if err != nil {
		t.Fatalf("defaults rejected: %v", err)
	}
	if !slices.Equal(o.Scenarios, pinning.AllScenarios) || !slices.Equal(o.Benchmarks, pinning.AllBenchmarks) || o.Repeats != 5 {
		t.Errorf("defaults: scenarios %v, benchmarks %v, %d repeats", o.Scenarios, o.Benchmarks, o.Repeats)
	}
	o, _, err = parse([]string{"-scenarios", " alone, exclusive ,", "-benchmarks", "stream", "-o", "json"})
	if err != nil || !slices.Equal(o.Scenarios, []string{"alone", "exclusive"}) || o.Output != "json" {
		t.Errorf("parsed %v %v %q, %v", o.Scenarios, o.Benchmarks, o.Output, err)
	}
	for _, bad := range [][]string{
		{"-scenarios", "exclusive"},
		{"-scenarios", "alone,gang"},
		{"-benchmarks", "hpl"},
		{"-repeats", "0"},
		{"stray"},
	} {
		if _, _, err := parse(bad); err == nil {
			t.Errorf("parse(%s) succeeded", strings.Join(bad, " "))
		}
	}
}
