package config

import (
	"fmt"
	"strings"
)

// Problem is one thing wrong with a config file.
type Problem struct {
	// File is the file's name as given to Load or Parse.
	File string
	// Line is the 1-based line the problem is on; 0 when the problem is
	// not on one line.
	Line int
	// Key is the dotted key the problem is about, such as
	// "devices.hall_light.class"; "" for the file as a whole. A key that is
	// not a plain word is quoted: devices."Hall Light".
	Key string
	// Message says what is wrong and, where it helps, what would be right.
	Message string
}

// Error formats p as file:line: key: message, leaving out what p lacks.
func (p *Problem) Error() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d", p.Line)
	}
	b.WriteString(": ")
	if p.Key != "" {
		b.WriteString(p.Key)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// Error is every problem found in one config file, sorted by line. Load
// and Parse return it, as an error, whenever a file is readable but wrong.
type Error struct {
	Problems []*Problem
}

// Error formats every problem on a line of its own.
func (e *Error) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the problems, for errors.As.
func (e *Error) Unwrap() []error {
	errs := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		errs[i] = p
	}
	return errs
}
