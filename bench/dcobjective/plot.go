package main

import (
	"io"

	"github.com/finegrain-dev/finegrain/bench/internal/plot"
	"github.com/finegrain-dev/finegrain/bench/servicerun"
)

// plot draws result.png: one row per measured arm — the load (offered and achieved requests/s),
// the p99 latency against the target (ms), and the CPUs granted and used with the replicas and
// the decisions so far.
func (r *Result) plot(w io.Writer) error {
	type row struct {
		name string
		m    *servicerun.Measured
	}
	var rows []row
	for _, a := range r.arms() {
		if a.arm != nil && a.arm.Measured != nil {
			rows = append(rows, row{a.name, a.arm.Measured})
		}
	}
	if len(rows) == 0 {
		// Nothing measured: an empty canvas that says so, so that the file is never stale.
		c := plot.NewCanvas(600, 80)
		c.Text(20, 40, "no arm was measured: see result.json's errors", plot.Black)
		return c.Encode(w)
	}
	c := plot.NewCanvas(servicerun.RowWidth, servicerun.RowHeight*len(rows))
	for i, rw := range rows {
		if err := rw.m.Draw(c, i*servicerun.RowHeight, rw.name, r.Setup.TargetSeconds); err != nil {
			return err
		}
	}
	return c.Encode(w)
}
