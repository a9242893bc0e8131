package powerloss

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/hearthd/hearth/simulator/scenario/chart"
)

// writeFloodPlot draws the accepts per 100 ms against the time since the
// cut, one panel per strategy with the same axes, so that waves and
// spreads compare at a glance, and writes it to path: SVG, or PNG if path
// ends in ".png". A dashed line marks the even spread N/(10·W), a dotted
// one the guard's rate per 100 ms, if any. Against an external broker the
// accepts are the devices' (their CONNACKs), which the header says.
func writeFloodPlot(path string, c Config, runs []floodRun) error {
	format, err := chart.Format(path)
	if err != nil {
		return err
	}
	xMax, yMax := 1.0, c.Even()
	if c.MaxRate > 0 {
		yMax = max(yMax, c.MaxRate/10)
	}
	for _, r := range runs {
		xMax = max(xMax, float64(len(r.perTenth()))/10)
		yMax = max(yMax, float64(r.peakTenth()))
	}
	yMax *= 1.05

	cols := min(3, len(runs))
	rows := (len(runs) + cols - 1) / cols
	panels := make([]*plot.Plot, len(runs))
	for i, r := range runs {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s: peak %d (%.2f× even)", r.strategy, r.peakTenth(), float64(r.peakTenth())/c.Even())
		p.X.Label.Text = "seconds since the cut"
		p.X.Tick.Marker = plot.TickerFunc(chart.RoundTicks)
		p.Y.Label.Text = "accepted per 100 ms"
		p.Add(plotter.NewGrid())

		tenths := r.perTenth()
		xys := make(plotter.XYs, 0, len(tenths)+1)
		for j, n := range tenths {
			xys = append(xys, plotter.XY{X: float64(j) / 10, Y: float64(n)})
		}
		xys = append(xys, plotter.XY{X: float64(len(tenths)) / 10, Y: 0})
		line, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		line.StepStyle = plotter.PostStep
		line.Color = floodColors[i%len(floodColors)]
		line.Width = vg.Points(1)
		p.Add(line)

		even := plotter.NewFunction(func(float64) float64 { return c.Even() })
		even.Color = color.Gray{Y: 60}
		even.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		p.Add(even)
		if c.MaxRate > 0 {
			guard := plotter.NewFunction(func(float64) float64 { return c.MaxRate / 10 })
			guard.Color = color.Gray{Y: 60}
			guard.Dashes = []vg.Length{vg.Points(1), vg.Points(2)}
			p.Add(guard)
		}
		// Set after Add, which widens the axes to the data.
		p.X.Min, p.X.Max = 0, xMax
		p.Y.Min, p.Y.Max = 0, yMax
		panels[i] = p
	}

	w, h := 11*vg.Inch, vg.Length(rows)*3.2*vg.Inch+vg.Points(54)
	canvas, err := draw.NewFormattedCanvas(w, h, format)
	if err != nil {
		return err
	}
	dc := draw.New(canvas)
	guard := "no accept guard"
	if c.MaxRate > 0 {
		guard = fmt.Sprintf("accept guard %g/s", c.MaxRate)
	}
	title := fmt.Sprintf("Power-loss flood: %d devices, cut %s, %s, %s; backoff base W = %v, cap %v",
		c.Devices, c.Cut, c.Transport, guard, c.Base, c.Cap)
	where := "at the broker"
	if c.External() {
		where = "timed by the devices"
	}
	legend := fmt.Sprintf("connections accepted (%s) per 100 ms; dashed: the even spread N/(10·W) = %.0f", where, c.Even())
	if c.MaxRate > 0 {
		legend += fmt.Sprintf("; dotted: the guard, %g per 100 ms", c.MaxRate/10)
	}
	header := plot.New().Title.TextStyle
	header.Font.Size = vg.Points(12)
	header.XAlign = draw.XCenter
	dc.FillText(header, vg.Point{X: w / 2, Y: h - vg.Points(16)}, title)
	header.Font.Size = vg.Points(10)
	dc.FillText(header, vg.Point{X: w / 2, Y: h - vg.Points(32)}, legend)
	dc.Max.Y -= vg.Points(48)
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Points(24), PadY: vg.Points(16), PadTop: vg.Points(4),
		PadBottom: vg.Points(8), PadLeft: vg.Points(8), PadRight: vg.Points(12)}
	for i, p := range panels {
		p.Draw(tiles.At(dc, i%cols, i/cols))
	}

	return chart.WriteFile(path, canvas)
}

// floodColors tell the strategies apart, in table order: none, fixed and
// exponential in warm colours, the jitters in cool ones.
var floodColors = []color.Color{
	color.RGBA{R: 120, G: 120, B: 120, A: 255}, // none: grey
	color.RGBA{R: 215, G: 48, B: 39, A: 255},   // fixed: red
	color.RGBA{R: 244, G: 109, B: 67, A: 255},  // exponential: orange
	color.RGBA{R: 33, G: 102, B: 172, A: 255},  // full: blue
	color.RGBA{R: 118, G: 42, B: 131, A: 255},  // equal: purple
	color.RGBA{R: 27, G: 120, B: 55, A: 255},   // decorrelated: green
}
