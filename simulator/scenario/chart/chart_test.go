package chart

import (
	"strings"
	"testing"

	"gonum.org/v1/plot"
)

func TestFormatIsTheExtension(t *testing.T) {
	for _, tc := range []struct{ path, want string }{
		{"docs/retry-contention.svg", "svg"},
		{"plot.PNG", "png"},
		{"plot.gif", ""},
		{"plot", ""},
	} {
		got, err := Format(tc.path)
		if got != tc.want || (err == nil) != (tc.want != "") {
			t.Errorf("Format(%q) = %q, %v; want %q", tc.path, got, err, tc.want)
		}
	}
}

// labels are the labelled ticks' labels, joined.
func labels(ticks []plot.Tick) string {
	var l []string
	for _, t := range ticks {
		if t.Label != "" {
			l = append(l, t.Label)
		}
	}
	return strings.Join(l, " ")
}

func TestTicksAreRound(t *testing.T) {
	if got, want := labels(RoundTicks(10, 190)), "20 40 60 80 100 120 140 160 180"; got != want {
		t.Errorf("RoundTicks(10, 190) labels %s, want %s", got, want)
	}
	ticks := LogTicks(3, 250)
	if got, want := labels(ticks), "5 10 20 50 100 200"; got != want {
		t.Errorf("LogTicks(3, 250) labels %s, want %s", got, want)
	}
	if len(ticks) != 7+9+2 { // 3–9, 10–90, 100 and 200
		t.Errorf("LogTicks(3, 250): %d ticks, want 18", len(ticks))
	}
}
