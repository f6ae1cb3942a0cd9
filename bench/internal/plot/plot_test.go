package plot

import (
	"bytes"
	"image"
	"image/png"
	"testing"
)

func TestNiceCeil(t *testing.T) {
	for in, want := range map[float64]float64{0: 1, 0.7: 1, 1.2: 2, 3: 5, 7: 10, 42: 50, 130: 200} {
		if got := NiceCeil(in); got != want {
			t.Errorf("NiceCeil(%v) = %v, want %v", in, got, want)
		}
	}
}

// A chart draws each series in its palette colour inside its rectangle and encodes as PNG.
func TestChartDraw(t *testing.T) {
	c := NewCanvas(400, 300)
	r := image.Rect(0, 0, 400, 300)
	err := Chart{Title: "t", XLabel: "x", YLabel: "y"}.Draw(c, r, []Series{
		{Name: "a", X: []float64{0, 10}, Y: []float64{0, 10}},
		{Name: "b", X: []float64{0, 5, 10}, Y: []float64{5, 5, 2}, Steps: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	found := map[int]bool{}
	for y := 0; y < 300; y++ {
		for x := 0; x < 400; x++ {
			for i := range 2 {
				if c.RGBAAt(x, y) == Palette[i] {
					found[i] = true
				}
			}
		}
	}
	if !found[0] || !found[1] {
		t.Errorf("series colours drawn: %v", found)
	}
	var buf bytes.Buffer
	if err := c.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	if img, err := png.Decode(&buf); err != nil || img.Bounds() != r {
		t.Errorf("PNG: %v, %v", img.Bounds(), err)
	}
	for _, bad := range [][]Series{nil, {{Name: "odd", X: []float64{1}, Y: nil}}} {
		if err := (Chart{Title: "t"}).Draw(c, r, bad); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

func TestTicks(t *testing.T) {
	for _, tc := range []struct {
		top  float64
		step float64
		n    int
	}{{300, 50, 6}, {3500, 1000, 4}, {64, 20, 4}, {0, 1, 1}, {1, 0.2, 5}} {
		if step, n := ticks(tc.top); step != tc.step || n != tc.n {
			t.Errorf("ticks(%v) = %v × %d, want %v × %d", tc.top, step, n, tc.step, tc.n)
		}
	}
}
