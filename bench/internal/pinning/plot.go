package pinning

import (
	"fmt"
	"image/color"
	"io"
	"math"

	"github.com/finegrain-dev/finegrain/bench/internal/plot"
)

// Plot geometry in pixels.
const (
	plotW, plotH     = 960, 520
	marginL, marginR = 80, 30
	marginT, marginB = 50, 70
)

var (
	goalLine = color.RGBA{200, 40, 40, 255}
	// scenarioColors keeps one colour per scenario across plots.
	scenarioColors = map[string]color.RGBA{
		Alone:         {120, 120, 120, 255},
		Unmanaged:     {214, 96, 77, 255},
		Exclusive:     {26, 152, 80, 255},
		Coarse:        {69, 117, 180, 255},
		Fine:          {102, 189, 99, 255},
		KubeletStatic: {253, 174, 97, 255},
	}
)

// WritePlot draws one benchmark's rows as a bar chart: the median of each scenario as a bar,
// the spread (min to max) as a whisker, the ratio to alone above it, and a line at 95 % of
// alone, the goal for pinned ranks under noise.
func WritePlot(w io.Writer, title string, rows []Row) error {
	if len(rows) == 0 {
		return fmt.Errorf("plot %q: no rows", title)
	}
	img := plot.NewCanvas(plotW, plotH)

	top, alone := 0.0, 0.0
	for _, r := range rows {
		top = math.Max(top, r.Max)
		if r.Scenario == Alone {
			alone = r.Median
		}
	}
	top = plot.NiceCeil(top * 1.1)
	x0, x1, y0, y1 := marginL, plotW-marginR, plotH-marginB, marginT
	y := func(v float64) int { return y0 - int(math.Round(v/top*float64(y0-y1))) }

	for i := 0; i <= 5; i++ {
		v := top * float64(i) / 5
		img.HLine(x0, x1, y(v), plot.Grey)
		label := fmt.Sprintf("%.4g", v)
		img.Text(x0-8-plot.CharWidth*len(label), y(v)+4, label, plot.Black)
	}
	img.VLine(x0, y1, y0, plot.Black)
	img.HLine(x0, x1, y0, plot.Black)
	img.Text(x0, marginT-20, title, plot.Black)
	img.Text(8, marginT-20, rows[0].Unit, plot.Black)

	slot := (x1 - x0) / len(rows)
	barW := slot * 3 / 5
	for i, r := range rows {
		cx := x0 + slot*i + slot/2
		c, ok := scenarioColors[r.Scenario]
		if !ok {
			c = plot.Grey
		}
		img.Box(cx-barW/2, y(r.Median), cx+barW/2, y0, c)
		img.VLine(cx, y(r.Max), y(r.Min), plot.Black)
		img.HLine(cx-8, cx+8, y(r.Max), plot.Black)
		img.HLine(cx-8, cx+8, y(r.Min), plot.Black)
		img.Centred(cx, y(r.Max)-8, fmt.Sprintf("%.3g (%.2fx)", r.Median, r.RatioToAlone), plot.Black)
		img.Centred(cx, y0+20, r.Scenario, plot.Black)
		img.Centred(cx, y0+36, fmt.Sprintf("n=%d", r.Runs), plot.Black)
	}
	if alone > 0 {
		for x := x0; x < x1; x += 12 {
			img.HLine(x, min(x+6, x1), y(0.95*alone), goalLine)
		}
		img.Text(x0+6, y(0.95*alone)-6, "95% of alone", goalLine)
	}
	return img.Encode(w)
}
