package main

import (
	"errors"
	"fmt"
	"image"
	"io"

	"github.com/finegrain-dev/finegrain/bench/internal/plot"
)

// plot draws result.png: one row per measured arm — the load (offered and achieved requests/s),
// the p99 latency against the target (ms), and the CPUs granted and used with the replicas and
// the decisions so far.
func (r *Result) plot(w io.Writer) error {
	type row struct {
		name string
		m    *Measured
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
	const pw, ph = 560, 360
	c := plot.NewCanvas(3*pw, ph*len(rows))
	for i, rw := range rows {
		y := i * ph
		m := rw.m
		var t, offered, achieved, p99, target []float64
		for _, s := range m.Load {
			x := float64(s.Second)
			t = append(t, x)
			offered = append(offered, s.OfferedRate)
			achieved = append(achieved, float64(s.Achieved))
			p99 = append(p99, s.P99Seconds*1e3)
			target = append(target, r.Setup.TargetSeconds*1e3)
		}
		if len(t) == 0 {
			return fmt.Errorf("arm %s: no load series", rw.name)
		}
		var st, granted, used, replicas, decided []float64
		n := 0
		for _, p := range m.Size {
			if p.T < 0 {
				continue
			}
			for n < len(m.Decisions) && m.Decisions[n].T <= p.T {
				n++
			}
			st = append(st, p.T)
			granted = append(granted, p.Granted)
			used = append(used, p.CPUUsed)
			replicas = append(replicas, float64(p.Replicas))
			decided = append(decided, float64(n))
		}
		if len(st) == 0 {
			return errors.New("arm " + rw.name + ": no samples during the load")
		}
		charts := []struct {
			ch     plot.Chart
			series []plot.Series
		}{
			{plot.Chart{Title: rw.name + ": load", XLabel: "s", YLabel: "requests/s"}, []plot.Series{
				{Name: "offered", X: t, Y: offered, Steps: true}, {Name: "achieved", X: t, Y: achieved}}},
			{plot.Chart{Title: fmt.Sprintf("%s: p99 latency, %d s in violation", rw.name, m.ViolationSeconds), XLabel: "s", YLabel: "ms"}, []plot.Series{
				{Name: "p99", X: t, Y: p99}, {Name: "target", X: t, Y: target}}},
			{plot.Chart{Title: fmt.Sprintf("%s: CPUs, %.0f CPU-s, %d resizes", rw.name, m.CPUSeconds, m.Resizes), XLabel: "s", YLabel: "cores / count"}, []plot.Series{
				{Name: "granted", X: st, Y: granted, Steps: true}, {Name: "used", X: st, Y: used},
				{Name: "replicas", X: st, Y: replicas, Steps: true}, {Name: "decisions so far", X: st, Y: decided, Steps: true}}},
		}
		for k, ch := range charts {
			if err := ch.ch.Draw(c, image.Rect(k*pw, y, (k+1)*pw, y+ph), ch.series); err != nil {
				return err
			}
		}
	}
	return c.Encode(w)
}
