package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/hearthd/hearth/api"
)

// store shows whether hearthd's store was quarantined (GET
// /api/v1/store), or with "ack" acknowledges the quarantine (POST
// /api/v1/store/ack), which takes a principal allowed every device.
//
//	hearthctl store [-json]
//	hearthctl store ack [-json]
func (c *cli) store(args []string) error {
	ack := len(args) > 0 && args[0] == "ack"
	if ack {
		args = args[1:]
	}
	name := "hearthctl store"
	if ack {
		name += " ack"
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	asJSON := fs.Bool("json", false, "print hearthd's answer as one line of JSON")
	fs.Usage = func() {
		fmt.Fprintf(c.stderr, "usage: hearthctl store [-json]\n       hearthctl store ack [-json]\n\n"+
			"Whether hearthd found its store damaged at start and quarantined it (moved hearth.db to\n"+
			"hearth.db.corrupt-<time> and started on a fresh store). Once you have looked at it, 'store ack'\n"+
			"acknowledges the quarantine: the notification's state, the metric and the degraded /readyz\n"+
			"check clear. It takes the token of a principal allowed every device.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := c.parseFlags(fs, args); err != nil {
		return err
	}
	var raw json.RawMessage
	var err error
	if ack {
		err = c.post("/api/v1/store/ack", &raw)
	} else {
		err = c.get("/api/v1/store", nil, &raw)
	}
	if err != nil {
		return err
	}
	var st api.StoreState
	if err := json.Unmarshal(raw, &st); err != nil || (st.State != api.StoreOK && st.State != api.StoreQuarantined) {
		return fmt.Errorf("unexpected answer from hearthd: %s", cell(string(raw)))
	}
	if *asJSON {
		_, err := fmt.Fprintf(c.stdout, "%s\n", raw)
		return err
	}
	return printStoreState(c.stdout, st)
}

// printStoreState says st in words.
func printStoreState(w io.Writer, st api.StoreState) error {
	switch {
	case st.State == api.StoreQuarantined && st.StoreQuarantine != nil:
		fmt.Fprintln(w, "store: QUARANTINED, not acknowledged")
		printQuarantine(w, *st.StoreQuarantine)
		fmt.Fprintln(w, "Commands pending in the damaged store may be lost; commands issued before the quarantine are refused")
		fmt.Fprintln(w, "as stale_command for the dedup window. Once you have looked at the file: hearthctl store ack")
	case st.LastQuarantine != nil:
		fmt.Fprintln(w, "store: ok")
		fmt.Fprintln(w, "last quarantine, acknowledged:")
		printQuarantine(w, *st.LastQuarantine)
	default:
		fmt.Fprintln(w, "store: ok, never quarantined")
	}
	return nil
}

func printQuarantine(w io.Writer, q api.StoreQuarantine) {
	fmt.Fprintf(w, "  at:       %s\n", q.At.Format(time.RFC3339))
	fmt.Fprintf(w, "  file:     %s\n", cell(q.File))
	fmt.Fprintf(w, "  cause:    %s\n", cell(q.Cause))
	fmt.Fprintf(w, "  salvaged: %s\n", counts(q.Salvaged))
	fmt.Fprintf(w, "  skipped:  %s\n", counts(q.Skipped))
	fmt.Fprintf(w, "  ended:    %d pending commands ended failed (store_damaged), not sent again\n", q.Ended)
	if !q.AckedAt.IsZero() {
		fmt.Fprintf(w, "  acked:    %s by %s\n", q.AckedAt.Format(time.RFC3339), cell(q.AckedBy))
	}
}

func counts(c api.StoreCounts) string {
	return fmt.Sprintf("%d commands, %d audit entries, %d dead letters, %d device states", c.Ops, c.Audit, c.DeadLetters, c.States)
}
