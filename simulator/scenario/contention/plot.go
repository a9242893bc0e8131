package contention

import (
	"fmt"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/hearthd/hearth/simulator/scenario/chart"
)

// WritePlot draws the study as one image of two panels side by side, calls
// against clients and completion time against clients, with one line per
// strategy, and writes it to path: SVG, or PNG if path ends in ".png".
// Calls use a logarithmic axis: without backoff they grow about as N²,
// far above the rest.
func WritePlot(path string, c Config, strats []Strategy, points []Point) error {
	format, err := chart.Format(path)
	if err != nil {
		return err
	}
	calls := panel("Work: write attempts", "calls (log scale)")
	completion := panel("Completion time of the last client", "milliseconds (log scale)")
	for i, s := range strats {
		callXYs := make(plotter.XYs, len(points))
		timeXYs := make(plotter.XYs, len(points))
		for j, p := range points {
			callXYs[j] = plotter.XY{X: float64(p.Clients), Y: p.Calls[i]}
			timeXYs[j] = plotter.XY{X: float64(p.Clients), Y: float64(p.Completion[i]) / float64(time.Millisecond)}
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
			pl.p.Legend.Add(s.Name, line, dots)
		}
	}

	const w, h = 11 * vg.Inch, 4.5 * vg.Inch
	canvas, err := draw.NewFormattedCanvas(w, h, format)
	if err != nil {
		return err
	}
	dc := draw.New(canvas)
	title := fmt.Sprintf("Contention for one row: mean of %d runs per point; base %v, cap %v, multiplier 2; network |N(%v, %v)|",
		c.Runs, c.Base, c.Cap, c.NetMean, c.NetStdDev)
	header := plot.New().Title.TextStyle
	header.Font.Size = vg.Points(12)
	header.XAlign = draw.XCenter
	dc.FillText(header, vg.Point{X: w / 2, Y: h - vg.Points(16)}, title)
	dc.Max.Y -= vg.Points(34)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Points(36), PadTop: vg.Points(4),
		PadBottom: vg.Points(8), PadLeft: vg.Points(8), PadRight: vg.Points(12)}
	calls.Draw(tiles.At(dc, 0, 0))
	completion.Draw(tiles.At(dc, 1, 0))
	return chart.WriteFile(path, canvas)
}

// panel is an empty plot with the study's axes: clients on x, a
// logarithmic y, and the legend in the bottom-right corner, which the
// rising lines leave free.
func panel(title, yLabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "clients"
	p.X.Tick.Marker = plot.TickerFunc(chart.RoundTicks)
	p.Y.Label.Text = yLabel
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.TickerFunc(chart.LogTicks)
	p.Legend.YOffs = vg.Points(8)
	p.Legend.XOffs = -vg.Points(8)
	p.Add(plotter.NewGrid())
	return p
}
