package main

import (
	"io"
	"os"

	"golang.org/x/term"

	"github.com/hearthd/hearth/simulator/scenario/progress"
)

// isTerminal reports whether w is a terminal (a *os.File that
// golang.org/x/term says is one). Tests replace it.
var isTerminal = func(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// phasesFor is the progress of the scenario name: a line per phase on
// stderr when it is a terminal, nil (nothing) when it is not, so that
// redirected output and CI logs hold no progress lines.
func phasesFor(stderr io.Writer, name string) *progress.Phases {
	if !isTerminal(stderr) {
		return nil
	}
	return progress.New(stderr, name)
}
