package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	_ "gonum.org/v1/plot/vg/vgimg" // the png format
	_ "gonum.org/v1/plot/vg/vgsvg" // the svg format
)

// writePlot draws the study as one image of two panels side by side, calls
// against clients and completion time against clients, with one line per
// strategy, and writes it to path: SVG, or PNG if path ends in ".png".
// Calls use a logarithmic axis: without backoff they grow about as N²,
// far above the rest.
func writePlot(path string, c studyConfig, strats []strategy, points []point) error {
	format := strings.ToLower(strings.TrimPrefix(filepath.Ext(path), "."))
	if format != "svg" && format != "png" {
		return fmt.Errorf("%s: want a .svg or .png file", path)
	}
	calls := panel("Work: write attempts", "calls (log scale)")
	completion := panel("Completion time of the last client", "milliseconds (log scale)")
	for i, s := range strats {
		callXYs := make(plotter.XYs, len(points))
		timeXYs := make(plotter.XYs, len(points))
		for j, p := range points {
			callXYs[j] = plotter.XY{X: float64(p.clients), Y: p.calls[i]}
			timeXYs[j] = plotter.XY{X: float64(p.clients), Y: float64(p.completion[i]) / float64(time.Millisecond)}
		}
		for _, pl := range []struct {
			p   *plot.Plot
			xys plotter.XYs
		}{{calls, callXYs}, {completion, timeXYs}} {
			line, dots, err := plotter.NewLinePoints(pl.xys)
			if err != nil {
				return err
			}
			line.Color = plotutil.Color(i)
			line.Width = vg.Points(1.5)
			line.Dashes = plotutil.Dashes(i)
			dots.Color = plotutil.Color(i)
			dots.Shape = plotutil.Shape(i)
			pl.p.Add(line, dots)
			pl.p.Legend.Add(s.name, line, dots)
		}
	}

	const w, h = 11 * vg.Inch, 4.5 * vg.Inch
	canvas, err := draw.NewFormattedCanvas(w, h, format)
	if err != nil {
		return err
	}
	dc := draw.New(canvas)
	title := fmt.Sprintf("Contention for one row: mean of %d runs per point; base %v, cap %v, multiplier 2; network |N(%v, %v)|",
		c.runs, c.base, c.cap, c.netMean, c.netStdDev)
	header := plot.New().Title.TextStyle
	header.Font.Size = vg.Points(12)
	header.XAlign = draw.XCenter
	dc.FillText(header, vg.Point{X: w / 2, Y: h - vg.Points(16)}, title)
	dc.Max.Y -= vg.Points(34)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Points(36), PadTop: vg.Points(4),
		PadBottom: vg.Points(8), PadLeft: vg.Points(8), PadRight: vg.Points(12)}
	calls.Draw(tiles.At(dc, 0, 0))
	completion.Draw(tiles.At(dc, 1, 0))

	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := canvas.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// panel is an empty plot with the study's axes: clients on x, a
// logarithmic y, and the legend in the bottom-right corner, which the
// rising lines leave free.
func panel(title, yLabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "clients"
	p.X.Tick.Marker = plot.TickerFunc(roundTicks)
	p.Y.Label.Text = yLabel
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.TickerFunc(logTicks)
	p.Legend.YOffs = vg.Points(8)
	p.Legend.XOffs = -vg.Points(8)
	p.Add(plotter.NewGrid())
	return p
}

// roundTicks labels [lo, hi] at multiples of 1, 2 or 5 times a power of
// ten, at most ten of them, with integer labels.
func roundTicks(lo, hi float64) []plot.Tick {
	step := 1.0
	for i := 0; (hi-lo)/step > 10; i++ {
		step *= [...]float64{2, 2.5, 2}[i%3] // 1, 2, 5, 10, 20, 50…
	}
	var ticks []plot.Tick
	for v := math.Ceil(lo/step) * step; v <= hi; v += step {
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
	}
	return ticks
}

// logTicks marks [lo, hi] (lo > 0) at every integer times a power of ten
// and labels 1, 2 and 5 times a power of ten, so that a logarithmic axis
// can be read without counting minor ticks.
func logTicks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for p := math.Pow10(int(math.Floor(math.Log10(lo)))); p <= hi; p *= 10 {
		for m := 1.0; m <= 9; m++ {
			v := m * p
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = strconv.FormatFloat(v, 'f', -1, 64)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}
