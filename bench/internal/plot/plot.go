// Package plot draws the benchmarks' and experiments' PNG charts with the standard library's
// image packages and a fixed bitmap font: a canvas with lines and text, axes that read easily,
// and line charts of several series. It computes pixels only; callers own the files.
package plot

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

// Colours every chart uses.
var (
	White = color.RGBA{255, 255, 255, 255}
	Black = color.RGBA{0, 0, 0, 255}
	Grey  = color.RGBA{200, 200, 200, 255}
	// Palette gives series their colours, in order.
	Palette = []color.RGBA{
		{214, 96, 77, 255}, {69, 117, 180, 255}, {26, 152, 80, 255}, {253, 174, 97, 255},
		{118, 42, 131, 255}, {120, 120, 120, 255},
	}
)

// CharWidth is the width of one character of the font in pixels.
const CharWidth = 7

// Canvas is an image being drawn on a white background.
type Canvas struct {
	*image.RGBA
}

// NewCanvas returns a white canvas of w × h pixels.
func NewCanvas(w, h int) Canvas {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(img, img.Bounds(), &image.Uniform{White}, image.Point{}, draw.Src)
	return Canvas{img}
}

// HLine draws a horizontal line from xa to xb at y.
func (c Canvas) HLine(xa, xb, y int, col color.Color) {
	for x := min(xa, xb); x <= max(xa, xb); x++ {
		c.Set(x, y, col)
	}
}

// VLine draws a vertical line at x from ya to yb.
func (c Canvas) VLine(x, ya, yb int, col color.Color) {
	for y := min(ya, yb); y <= max(ya, yb); y++ {
		c.Set(x, y, col)
	}
}

// Line draws a straight line two pixels wide from (xa, ya) to (xb, yb).
func (c Canvas) Line(xa, ya, xb, yb int, col color.Color) {
	n := max(abs(xb-xa), abs(yb-ya), 1)
	for i := 0; i <= n; i++ {
		x := xa + (xb-xa)*i/n
		y := ya + (yb-ya)*i/n
		c.Set(x, y, col)
		c.Set(x, y+1, col)
	}
}

// Box fills the rectangle from (xa, ya) to (xb, yb).
func (c Canvas) Box(xa, ya, xb, yb int, col color.Color) {
	draw.Draw(c.RGBA, image.Rect(xa, ya, xb, yb), &image.Uniform{col}, image.Point{}, draw.Src)
}

// Text writes s with its baseline's left end at (x, y).
func (c Canvas) Text(x, y int, s string, col color.Color) {
	d := font.Drawer{Dst: c.RGBA, Src: image.NewUniform(col), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

// Centred writes s centred on cx.
func (c Canvas) Centred(cx, y int, s string, col color.Color) {
	c.Text(cx-len(s)*CharWidth/2, y, s, col)
}

// Encode writes the canvas as PNG.
func (c Canvas) Encode(w io.Writer) error { return png.Encode(w, c.RGBA) }

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// NiceCeil rounds v up to 1, 2 or 5 times a power of ten, so an axis reads easily.
func NiceCeil(v float64) float64 {
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

// ticks divides an axis from 0 to at least top into at most six steps of 1, 2 or 5 times a
// power of ten: it returns the step and the number of steps.
func ticks(top float64) (float64, int) {
	step := NiceCeil(top / 6)
	return step, max(1, int(math.Ceil(top/step-1e-9)))
}

// Series is one line of a chart: points (X[i], Y[i]), X increasing.
type Series struct {
	Name string
	X, Y []float64
	// Steps draws the series as a step function (each value holds until the next X).
	Steps bool
}

// Chart is a line chart's frame.
type Chart struct {
	Title, XLabel, YLabel string
	// YMax fixes the y axis's top, drawn in quarters; 0 fits the axis to the data.
	YMax float64
}

// Draw draws the chart into the rectangle r of c: axes from 0, grid lines, the series in
// Palette's colours and a legend.
func (ch Chart) Draw(c Canvas, r image.Rectangle, series []Series) error {
	if len(series) == 0 {
		return fmt.Errorf("chart %q: no series", ch.Title)
	}
	xmax, ymax := 0.0, ch.YMax
	for _, s := range series {
		if len(s.X) != len(s.Y) || len(s.X) == 0 {
			return fmt.Errorf("chart %q: series %q has %d x and %d y values", ch.Title, s.Name, len(s.X), len(s.Y))
		}
		for i := range s.X {
			xmax = math.Max(xmax, s.X[i])
			if ch.YMax == 0 {
				ymax = math.Max(ymax, s.Y[i])
			}
		}
	}
	xstep, xn := ticks(xmax)
	ystep, yn := ticks(ymax * 1.05)
	if ch.YMax > 0 {
		ystep, yn = ch.YMax/4, 4
	}
	xmax, ymax = xstep*float64(xn), ystep*float64(yn)
	x0, x1, y0, y1 := r.Min.X+70, r.Max.X-20, r.Max.Y-45, r.Min.Y+40
	px := func(v float64) int { return x0 + int(math.Round(v/xmax*float64(x1-x0))) }
	py := func(v float64) int { return y0 - int(math.Round(v/ymax*float64(y0-y1))) }
	for i := 0; i <= yn; i++ {
		v := ystep * float64(i)
		c.HLine(x0, x1, py(v), Grey)
		label := fmt.Sprintf("%.6g", v)
		c.Text(x0-6-CharWidth*len(label), py(v)+4, label, Black)
	}
	for i := 0; i <= xn; i++ {
		v := xstep * float64(i)
		c.VLine(px(v), y0, y0+4, Black)
		c.Centred(px(v), y0+17, fmt.Sprintf("%.6g", v), Black)
	}
	c.VLine(x0, y1, y0, Black)
	c.HLine(x0, x1, y0, Black)
	c.Text(r.Min.X+10, r.Min.Y+16, ch.Title, Black)
	c.Text(r.Min.X+10, y1-10, ch.YLabel, Black)
	c.Centred((x0+x1)/2, y0+34, ch.XLabel, Black)
	lx := x1 - 10
	for i, s := range series {
		col := Palette[i%len(Palette)]
		for k := 1; k < len(s.X); k++ {
			if s.Steps {
				c.Line(px(s.X[k-1]), py(s.Y[k-1]), px(s.X[k]), py(s.Y[k-1]), col)
				c.Line(px(s.X[k]), py(s.Y[k-1]), px(s.X[k]), py(s.Y[k]), col)
			} else {
				c.Line(px(s.X[k-1]), py(s.Y[k-1]), px(s.X[k]), py(s.Y[k]), col)
			}
		}
		ly := y1 + 14*i + 6
		c.Box(lx-CharWidth*len(s.Name)-22, ly-8, lx-CharWidth*len(s.Name)-8, ly-2, col)
		c.Text(lx-CharWidth*len(s.Name), ly, s.Name, Black)
	}
	return nil
}
