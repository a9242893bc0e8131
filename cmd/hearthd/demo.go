package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/protocols/zwavejs"
	"github.com/hearthd/hearth/retry"
	"github.com/hearthd/hearth/simulator"
)

// demoWait bounds how long the demo waits for one command's final result.
const demoWait = 30 * time.Second

// runDemo plays the configured Zigbee2MQTT devices with the simulator in
// this process, sends them a few commands as an automation would, over
// MQTT, and prints every result. The simulator keeps running until ctx
// ends, so that commands sent by hand are answered too.
func runDemo(ctx context.Context, d *daemon, out io.Writer, log *slog.Logger) error {
	// hearthd subscribes first: a command published before its intake
	// subscription is in place would reach no one.
	select {
	case <-d.conn.Up():
	case <-ctx.Done():
		return nil
	}
	sim, err := simulator.New(simulator.Options{
		Broker:    d.brokerURL,
		Devices:   simDevices(d.cfg),
		Reconnect: simReconnect,
		Logger:    log.With("component", "simulator"),
	})
	if err != nil {
		return err
	}
	simCtx, stopSim := context.WithCancel(ctx)
	simDone := make(chan struct{})
	go func() {
		defer close(simDone)
		sim.Run(simCtx)
	}()
	// The simulator must leave before the daemon stops its broker.
	d.beforeStop = func() { stopSim(); <-simDone }
	select {
	case <-sim.Ready():
	case <-ctx.Done():
		return nil
	}

	results := make(chan devices.Result, 64)
	client := paho.NewClient(paho.NewClientOptions().
		AddBroker(d.brokerURL).
		SetClientID(fmt.Sprintf("hearth-demo-%d", time.Now().UnixNano())).
		SetOrderMatters(true))
	if t := client.Connect(); !t.WaitTimeout(demoWait) || t.Error() != nil {
		return fmt.Errorf("demo: connect to %s: %v", d.brokerURL, t.Error())
	}
	defer client.Disconnect(100)
	t := client.Subscribe(d.cfg.Prefix+"/+/result", 1, func(_ paho.Client, m paho.Message) {
		var r devices.Result
		if json.Unmarshal(m.Payload(), &r) == nil {
			results <- r
		}
	})
	if !t.WaitTimeout(demoWait) || t.Error() != nil {
		return fmt.Errorf("demo: subscribe: %v", t.Error())
	}

	// Fresh op_ids every run: a repeated demo must not be answered from the
	// store of the one before.
	run := time.Now().Format("150405") + "-" + strconv.Itoa(rand.IntN(1000))
	steps := []struct{ device, payload, note string }{
		{"hall_light", `{"state":"ON","brightness":128,"op_id":"demo-` + run + `-1"}`, "turn a light on at half brightness"},
		{"front_door", `{"state":"UNLOCK","op_id":"demo-` + run + `-2"}`, "unlock the front door (its state read first, then confirmed from lock_state)"},
		{"living_blinds", `{"position":40,"op_id":"demo-` + run + `-3"}`, "open the blinds to 40%"},
		{"hall_light", `{"state":"TOGGLE","op_id":"demo-` + run + `-4"}`, "a relative command: refused"},
		{"hall_light", `{"state":"ON","brightness":128,"op_id":"demo-` + run + `-1"}`, "the first command again, same op_id: answered from the store, not sent again"},
	}
	fmt.Fprintf(out, "\nhearthd demo: broker %s, HTTP http://%s, %d simulated Zigbee2MQTT devices\n",
		d.brokerURL, d.httpAddr(), len(simDevices(d.cfg)))
	fmt.Fprintf(out, "The demo runs without authentication (mqtt.allow_anonymous and http.allow_anonymous), so it listens on loopback only; without -demo, hearthd refuses anonymous clients and generates accounts into <data_dir>/%s.\n",
		config.CredentialsFileName)
	for _, s := range steps {
		if _, ok := d.cfg.Device(s.device); !ok {
			continue
		}
		var opID struct {
			OpID string `json:"op_id"`
		}
		json.Unmarshal([]byte(s.payload), &opID)
		fmt.Fprintf(out, "\n# %s\n→ %s/%s/set  %s\n", s.note, d.cfg.Prefix, s.device, s.payload)
		if t := client.Publish(d.cfg.Prefix+"/"+s.device+"/set", 1, false, s.payload); !t.WaitTimeout(demoWait) || t.Error() != nil {
			return fmt.Errorf("demo: publish: %v", t.Error())
		}
		if err := printUntilFinal(ctx, out, results, opID.OpID); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "\nhall_light received %d set message(s).\n", sim.Sets(address(d.cfg, "hall_light")))
	if err := demoOutage(ctx, d, client, results, run, out); err != nil {
		return err
	}
	fmt.Fprintf(out, `
Try one yourself while this runs (Ctrl-C stops it):
  mosquitto_sub -h %[1]s -p %[2]s -t '%[3]s/#' -v &
  mosquitto_pub -h %[1]s -p %[2]s -q 1 -t %[3]s/kitchen_light/set -m '{"state":"ON","brightness":200,"op_id":"try-1"}'
  curl -s http://%[4]s/readyz
  curl -s http://%[4]s/api/v1/breakers
  curl -s -X POST http://%[4]s/api/v1/devices/kitchen_light/commands -d '{"state":"OFF","op_id":"try-2"}'
  curl -s 'http://%[4]s/api/v1/ops/try-2?wait=30s'

`, host(d.brokerURL), port(d.brokerURL), d.cfg.Prefix, d.httpAddr())
	return nil
}

// demoOutage takes kitchen_light's Zigbee2MQTT bridge offline, as its
// retained bridge/state says when it stops, and shows the service's
// circuit breaker: commands fail fast while it is open, and the first one
// after the bridge is back is the probe that closes it.
func demoOutage(ctx context.Context, d *daemon, client paho.Client, results <-chan devices.Result, run string, out io.Writer) error {
	dev, ok := d.cfg.Device("kitchen_light")
	if !ok {
		return nil
	}
	svc, _ := d.cfg.Service(dev.Service)
	if !svc.Breaker.Enabled || svc.Protocol != config.ProtocolZigbee2MQTT {
		return nil
	}
	states := make(chan string, 16)
	stateTopic := d.cfg.Prefix + "/services/" + svc.Name + "/state"
	if t := client.Subscribe(stateTopic, 1, func(_ paho.Client, m paho.Message) {
		var st struct{ State string }
		if json.Unmarshal(m.Payload(), &st) == nil {
			states <- st.State
		}
	}); !t.WaitTimeout(demoWait) || t.Error() != nil {
		return fmt.Errorf("demo: subscribe: %v", t.Error())
	}
	defer client.Unsubscribe(stateTopic)
	await := func(want string) error {
		timeout := time.NewTimer(demoWait)
		defer timeout.Stop()
		for {
			select {
			case st := <-states:
				if st == want {
					fmt.Fprintf(out, "  %s: circuit breaker %s\n", stateTopic, st)
					return nil
				}
			case <-timeout.C:
				return fmt.Errorf("demo: the breaker of %s did not become %s", svc.Name, want)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	bridge := func(state string) error {
		fmt.Fprintf(out, "\n# the Zigbee2MQTT bridge says it is %s\n→ %s/bridge/state  {\"state\":%q} (retained)\n", state, svc.BaseTopic, state)
		t := client.Publish(svc.BaseTopic+"/bridge/state", 1, true, fmt.Sprintf(`{"state":%q}`, state))
		if !t.WaitTimeout(demoWait) || t.Error() != nil {
			return fmt.Errorf("demo: publish: %v", t.Error())
		}
		return nil
	}
	send := func(note, payload, opID string) error {
		fmt.Fprintf(out, "\n# %s\n→ %s/kitchen_light/set  %s\n", note, d.cfg.Prefix, payload)
		if t := client.Publish(d.cfg.Prefix+"/kitchen_light/set", 1, false, payload); !t.WaitTimeout(demoWait) || t.Error() != nil {
			return fmt.Errorf("demo: publish: %v", t.Error())
		}
		return printUntilFinal(ctx, out, results, opID)
	}
	if err := bridge("offline"); err != nil {
		return err
	}
	if err := await("open"); err != nil {
		return err
	}
	id := "demo-" + run + "-6"
	if err := send("while the breaker is open: fails fast, nothing is sent", `{"state":"ON","op_id":"`+id+`"}`, id); err != nil {
		return err
	}
	if err := bridge("online"); err != nil {
		return err
	}
	if err := await("half_open"); err != nil {
		return err
	}
	id = "demo-" + run + "-7"
	if err := send("half-open: this command is the probe", `{"state":"ON","op_id":"`+id+`"}`, id); err != nil {
		return err
	}
	return await("closed")
}

// printUntilFinal prints the results of opID until a terminal one.
func printUntilFinal(ctx context.Context, out io.Writer, results <-chan devices.Result, opID string) error {
	timeout := time.NewTimer(demoWait)
	defer timeout.Stop()
	for {
		select {
		case r := <-results:
			if r.OpID != opID {
				continue
			}
			line := fmt.Sprintf("  %-10s attempts=%d", r.Status, r.Attempts)
			if r.Reason != "" {
				line += "  reason=" + string(r.Reason)
			}
			if r.Detail != "" {
				line += "  (" + r.Detail + ")"
			}
			if r.State != nil {
				b, _ := json.Marshal(r.State)
				line += "  state=" + string(b)
			}
			fmt.Fprintln(out, line)
			if r.Status.Terminal() {
				return nil
			}
		case <-timeout.C:
			return fmt.Errorf("demo: no final result for %s within %s", opID, demoWait)
		case <-ctx.Done():
			return nil
		}
	}
}

// simulated are the device classes the simulator plays; the others
// (a motion sensor, say) are left to whoever publishes their reports.
var simulated = map[devices.Class]bool{devices.Light: true, devices.Switch: true, devices.Lock: true, devices.Cover: true, devices.Climate: true}

// simDevices lists the configured Zigbee2MQTT devices and Z-Wave JS UI
// nodes of the classes the simulator plays. A node
// whose address does not end in its number gets an ID from 100 up.
func simDevices(cfg *config.Config) []simulator.Device {
	var out []simulator.Device
	nodeIDs := map[string]int{}
	nodes := map[string]int{} // service and node → index in out
	for _, dev := range cfg.Devices {
		svc, ok := cfg.Service(dev.Service)
		if !ok {
			continue
		}
		sd := simulator.Device{Name: address(cfg, dev.ID), Class: string(dev.Class), BaseTopic: svc.BaseTopic}
		switch {
		case svc.Protocol == config.ProtocolZigbee2MQTT && simulated[dev.Class]:
		case svc.Protocol == config.ProtocolZWaveJS && simulated[dev.Class]:
			sd.Protocol, sd.GatewayName = simulator.ProtocolZWaveJS, svc.GatewayName
			// One simulated node per node address, with as many
			// endpoints as its devices name; its name is the address
			// as written (the simulator sanitises it as the gateway does).
			addr, err := zwavejs.ParseAddress(sd.Name, svc.NodeNames)
			if err != nil {
				continue
			}
			if strings.Count(sd.Name, "/") > strings.Count(addr.Node, "/") {
				sd.Name = sd.Name[:strings.LastIndexByte(sd.Name, '/')]
			}
			sd.Endpoints = addr.Endpoint
			if i, seen := nodes[svc.Name+"\x00"+addr.Node]; seen {
				out[i].Endpoints = max(out[i].Endpoints, addr.Endpoint)
				continue
			}
			nodes[svc.Name+"\x00"+addr.Node] = len(out)
			node := sd.Name[strings.LastIndexByte(sd.Name, '/')+1:]
			if n, err := strconv.Atoi(node); err == nil && n > 0 {
				sd.NodeID = n
			} else {
				nodeIDs[svc.Name] = max(nodeIDs[svc.Name], 100) + 1
				sd.NodeID = nodeIDs[svc.Name]
			}
		case svc.Protocol == config.ProtocolShelly && (dev.Class == devices.Switch || dev.Class == devices.Light || dev.Class == devices.Cover):
			sd.Protocol = simulator.ProtocolShelly
		case svc.Protocol == config.ProtocolTasmota && simulated[dev.Class]:
			if !tasmotaSimDevice(&out, nodes, svc, &sd) {
				continue
			}
		case svc.Protocol == config.ProtocolHomie && (dev.Class == devices.Switch || dev.Class == devices.Light):
			sd.Protocol = simulator.ProtocolHomie
		case svc.Protocol == config.ProtocolESPHome && (dev.Class == devices.Switch || dev.Class == devices.Light || dev.Class == devices.Cover || dev.Class == devices.Lock):
			sd.Protocol = simulator.ProtocolESPHome
		default:
			continue
		}
		if dev.Sleep.Sleepy {
			sd.WakeInterval, sd.AwakeWindow = dev.Sleep.WakeInterval, dev.Sleep.AwakeWindow
		}
		out = append(out, sd)
	}
	return out
}

func address(cfg *config.Config, id string) string {
	dev, _ := cfg.Device(id)
	if dev.Address != "" {
		return dev.Address
	}
	return id
}

func host(url string) string {
	hp := strings.TrimPrefix(url, "tcp://")
	if i := strings.LastIndex(hp, ":"); i >= 0 {
		return hp[:i]
	}
	return hp
}

func port(url string) string {
	if i := strings.LastIndex(url, ":"); i >= 0 {
		return url[i+1:]
	}
	return "1883"
}

// simReconnect spaces the simulated bridges' reconnects as real firmware
// should: exponential backoff with full jitter, base 250 ms, cap 30 s.
func simReconnect(n int, prev time.Duration, r simulator.Rand) time.Duration {
	return retry.Backoff{Base: 250 * time.Millisecond, Multiplier: 2, Cap: 30 * time.Second}.Delay(n, prev, r)
}
