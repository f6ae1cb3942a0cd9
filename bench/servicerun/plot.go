package servicerun

import (
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"io"
	"os"
	"path/filepath"

	"github.com/finegrain-dev/finegrain/bench/internal/plot"
)

// The size of one run's row of charts in pixels.
const (
	chartWidth = 560
	RowWidth   = 3 * chartWidth
	RowHeight  = 360
)

// Draw draws the run's row of three charts at height y of c: the load (offered and achieved
// requests/s), the p99 latency against the target (ms), and the CPUs granted and used with the
// replicas and the decisions so far. name titles the charts; target is in seconds.
func (m *Measured) Draw(c plot.Canvas, y int, name string, target float64) error {
	var t, offered, achieved, p99, targets []float64
	for _, s := range m.Load {
		x := float64(s.Second)
		t = append(t, x)
		offered = append(offered, s.OfferedRate)
		achieved = append(achieved, float64(s.Achieved))
		p99 = append(p99, s.P99Seconds*1e3)
		targets = append(targets, target*1e3)
	}
	if len(t) == 0 {
		return fmt.Errorf("%s: no load series", name)
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
		return errors.New(name + ": no samples during the load")
	}
	charts := []struct {
		ch     plot.Chart
		series []plot.Series
	}{
		{plot.Chart{Title: name + ": load", XLabel: "s", YLabel: "requests/s"}, []plot.Series{
			{Name: "offered", X: t, Y: offered, Steps: true}, {Name: "achieved", X: t, Y: achieved}}},
		{plot.Chart{Title: fmt.Sprintf("%s: p99 latency, %d s in violation", name, m.ViolationSeconds), XLabel: "s", YLabel: "ms"}, []plot.Series{
			{Name: "p99", X: t, Y: p99}, {Name: "target", X: t, Y: targets}}},
		{plot.Chart{Title: fmt.Sprintf("%s: CPUs, %.0f CPU-s, %d resizes", name, m.CPUSeconds, m.Resizes), XLabel: "s", YLabel: "cores / count"}, []plot.Series{
			{Name: "granted", X: st, Y: granted, Steps: true}, {Name: "used", X: st, Y: used},
			{Name: "replicas", X: st, Y: replicas, Steps: true}, {Name: "decisions so far", X: st, Y: decided, Steps: true}}},
	}
	for k, ch := range charts {
		if err := ch.ch.Draw(c, image.Rect(k*chartWidth, y, (k+1)*chartWidth, y+RowHeight), ch.series); err != nil {
			return err
		}
	}
	return nil
}

// PNG draws the run's row alone as a PNG.
func (m *Measured) PNG(w io.Writer, name string, target float64) error {
	c := plot.NewCanvas(RowWidth, RowHeight)
	if err := m.Draw(c, 0, name, target); err != nil {
		return err
	}
	return c.Encode(w)
}

// Save writes dir/NAME.json, v as indented JSON, and dir/NAME.png drawn by png, making dir.
func Save(dir, name string, v any, png func(io.Writer) error) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range []struct {
		ext   string
		write func(io.Writer) error
	}{{".json", func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}}, {".png", png}} {
		path := filepath.Join(dir, name+f.ext)
		w, err := os.Create(path)
		if err != nil {
			return err
		}
		err = f.write(w)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	return nil
}
