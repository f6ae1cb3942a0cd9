package pinning

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// Plot geometry in pixels.
const (
	plotW, plotH     = 960, 520
	marginL, marginR = 80, 30
	marginT, marginB = 50, 70
)

var (
	white    = color.RGBA{255, 255, 255, 255}
	black    = color.RGBA{0, 0, 0, 255}
	grey     = color.RGBA{200, 200, 200, 255}
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
	img := image.NewRGBA(image.Rect(0, 0, plotW, plotH))
	draw.Draw(img, img.Bounds(), &image.Uniform{white}, image.Point{}, draw.Src)

	top, alone := 0.0, 0.0
	for _, r := range rows {
		top = math.Max(top, r.Max)
		if r.Scenario == Alone {
			alone = r.Median
		}
	}
	top = niceCeil(top * 1.1)
	x0, x1, y0, y1 := marginL, plotW-marginR, plotH-marginB, marginT
	y := func(v float64) int { return y0 - int(math.Round(v/top*float64(y0-y1))) }

	for i := 0; i <= 5; i++ {
		v := top * float64(i) / 5
		hline(img, x0, x1, y(v), grey)
		label := fmt.Sprintf("%.4g", v)
		text(img, x0-8-7*len(label), y(v)+4, label, black)
	}
	vline(img, x0, y1, y0, black)
	hline(img, x0, x1, y0, black)
	text(img, x0, marginT-20, title, black)
	text(img, 8, marginT-20, rows[0].Unit, black)

	slot := (x1 - x0) / len(rows)
	barW := slot * 3 / 5
	for i, r := range rows {
		cx := x0 + slot*i + slot/2
		c, ok := scenarioColors[r.Scenario]
		if !ok {
			c = grey
		}
		draw.Draw(img, image.Rect(cx-barW/2, y(r.Median), cx+barW/2, y0), &image.Uniform{c}, image.Point{}, draw.Src)
		vline(img, cx, y(r.Max), y(r.Min), black)
		hline(img, cx-8, cx+8, y(r.Max), black)
		hline(img, cx-8, cx+8, y(r.Min), black)
		centred(img, cx, y(r.Max)-8, fmt.Sprintf("%.3g (%.2fx)", r.Median, r.RatioToAlone), black)
		centred(img, cx, y0+20, r.Scenario, black)
		centred(img, cx, y0+36, fmt.Sprintf("n=%d", r.Runs), black)
	}
	if alone > 0 {
		for x := x0; x < x1; x += 12 {
			hline(img, x, min(x+6, x1), y(0.95*alone), goalLine)
		}
		text(img, x0+6, y(0.95*alone)-6, "95% of alone", goalLine)
	}
	return png.Encode(w, img)
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten, so the axis reads easily.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func hline(img *image.RGBA, xa, xb, y int, c color.Color) {
	for x := xa; x <= xb; x++ {
		img.Set(x, y, c)
	}
}

func vline(img *image.RGBA, x, ya, yb int, c color.Color) {
	for y := min(ya, yb); y <= max(ya, yb); y++ {
		img.Set(x, y, c)
	}
}

func text(img *image.RGBA, x, y int, s string, c color.Color) {
	d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

func centred(img *image.RGBA, cx, y int, s string, c color.Color) {
	text(img, cx-len(s)*7/2, y, s, c)
}
