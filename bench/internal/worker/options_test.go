package worker

import (
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	ok := Options{Mode: ModeSTREAM, Procs: 2, Output: OutputJSON, N: 64, Duration: time.Second, NTimes: 5,
		NoiseThreads: 1, NoiseBytes: 1 << 20, SampleInterval: time.Millisecond, ReadyTimeout: time.Second}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid options rejected: %v", err)
	}
	for _, tc := range []struct {
		change func(o *Options)
		want   string
	}{
		{func(o *Options) { o.Mode = "hpl" }, `unknown mode "hpl"`},
		{func(o *Options) { o.Output = "csv" }, `unknown output format "csv"`},
		{func(o *Options) { o.Procs = 0 }, "-np 0"},
		{func(o *Options) { o.Duration = -time.Second }, "must not be negative"},
		{func(o *Options) { o.ArrayLen = -1 }, "-array -1"},
		{func(o *Options) { o.NTimes = 1 }, "at least 2 passes"},
		{func(o *Options) { o.Mode, o.NoiseBytes = ModeNoise, 10 }, "-mem ≥ 1 MiB"},
		{func(o *Options) { o.SampleInterval = 0 }, "must be positive"},
	} {
		o := ok
		tc.change(&o)
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want an error containing %q", err, tc.want)
		}
	}
}
