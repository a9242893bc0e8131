package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/hearthd/hearth/dispatcher"
)

// getDevices asks GET /api/v1/devices and returns the devices, decoded
// and as hearthd wrote them.
func (c *cli) getDevices() ([]dispatcher.DeviceStatus, []json.RawMessage, error) {
	var answer struct {
		Devices []json.RawMessage `json:"devices"`
	}
	if err := c.get("/api/v1/devices", nil, &answer); err != nil {
		return nil, nil, err
	}
	list := make([]dispatcher.DeviceStatus, len(answer.Devices))
	for i, raw := range answer.Devices {
		if err := json.Unmarshal(raw, &list[i]); err != nil {
			return nil, nil, fmt.Errorf("unexpected answer from hearthd: device %d: %v", i, err)
		}
	}
	return list, answer.Devices, nil
}

// devicesCmd is hearthctl devices [-json]: every device's status, in
// config order.
func (c *cli) devicesCmd(args []string) error {
	fs := flag.NewFlagSet("hearthctl devices", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	asJSON := fs.Bool("json", false, "print each device as one line of JSON")
	fs.Usage = func() {
		fmt.Fprintf(c.stderr, "usage: hearthctl devices [-json]\n\nEvery configured device, in config order: its service and class, availability, commands\n"+
			"pending, its service's breaker, notes (safety-critical, sleepy and its lease) and the last\n"+
			"state Hearth mirrors on <prefix>/<device>.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := c.parseFlags(fs, args); err != nil {
		return err
	}
	list, raws, err := c.getDevices()
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSONLines(c.stdout, raws)
	}
	return printDevices(c.stdout, list)
}

// printDevices prints devices as a table with a header, or says there are
// none.
func printDevices(w io.Writer, list []dispatcher.DeviceStatus) error {
	if len(list) == 0 {
		_, err := fmt.Fprintln(w, "no devices")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DEVICE\tSERVICE\tCLASS\tAVAILABILITY\tPENDING\tBREAKER\tNOTE\tSTATE")
	for _, d := range list {
		var notes []string
		if d.SafetyCritical {
			notes = append(notes, "safety-critical")
		}
		if d.Sleepy {
			switch {
			case d.Lease == nil:
				notes = append(notes, "sleepy")
			case d.Lease.Awake:
				notes = append(notes, "sleepy, awake until "+timeCell(d.Lease.Until))
			default:
				notes = append(notes, "sleepy, asleep")
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", cell(d.ID), cell(d.Service), cell(d.Class),
			cell(d.Availability), strconv.Itoa(d.Pending), cell(d.Breaker), cell(strings.Join(notes, "; ")), cell(compactJSON(d.State)))
	}
	return tw.Flush()
}
