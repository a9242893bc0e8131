// Package chart holds what the plots of hearth-sim's scenarios share: the
// image format named by a file's extension, tick markers for an axis of
// round numbers and for a logarithmic one, and writing a drawn canvas to a
// file. It draws no plot itself and knows nothing of the scenarios.
package chart

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	_ "gonum.org/v1/plot/vg/vgimg" // the png format
	_ "gonum.org/v1/plot/vg/vgsvg" // the svg format
)

// Format returns "svg" or "png" from path's extension, case-insensitively;
// any other extension is an error naming path.
func Format(path string) (string, error) {
	format := strings.ToLower(strings.TrimPrefix(filepath.Ext(path), "."))
	if format != "svg" && format != "png" {
		return "", fmt.Errorf("%s: want a .svg or .png file", path)
	}
	return format, nil
}

// WriteFile writes a drawn canvas to path, creating or truncating it.
func WriteFile(path string, canvas vg.CanvasWriterTo) error {
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

// RoundTicks labels [lo, hi] at multiples of 1, 2 or 5 times a power of
// ten, at most ten of them, with integer labels. It is a plot.TickerFunc.
func RoundTicks(lo, hi float64) []plot.Tick {
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

// LogTicks marks [lo, hi] (lo > 0) at every integer times a power of ten
// and labels 1, 2 and 5 times a power of ten, so that a logarithmic axis
// can be read without counting minor ticks. It is a plot.TickerFunc.
func LogTicks(lo, hi float64) []plot.Tick {
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
