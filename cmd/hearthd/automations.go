package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/hearthd/hearth/automations"
	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/dispatcher"
	"github.com/hearthd/hearth/notify"
	"github.com/hearthd/hearth/topic"
)

// actuator carries the automations' actions: commands go through the
// dispatcher's intake like any other (stored, attempted, confirmed,
// reported on <prefix>/<device>/result), notifications through its
// outbox, and publishes straight to the broker.
type actuator struct {
	disp *dispatcher.Dispatcher
	conn link
	log  *slog.Logger
}

// Command submits payload, a JSON command with its op_id, for device. It
// returns once the command is taken into the intake queue; its result
// follows on the result topic.
func (a actuator) Command(ctx context.Context, device string, payload []byte) error {
	return a.disp.Submit(ctx, dispatcher.Request{
		Device:    device,
		Payload:   payload,
		Principal: automationPrincipal,
		Done: func(r devices.Result) {
			if r.Status == devices.Rejected {
				a.log.Error("automation command rejected", "device", device, "op_id", r.OpID, "reason", r.Reason, "detail", r.Detail)
			}
		},
	})
}

// Publish publishes at QoS 1.
func (a actuator) Publish(ctx context.Context, topic string, payload []byte, retained bool) error {
	if err := a.conn.Publish(ctx, topic, 1, retained, payload); err != nil {
		return fmt.Errorf("publish %s: %w", topic, err)
	}
	return nil
}

// Notify publishes n on <prefix>/notifications.
func (a actuator) Notify(_ context.Context, n automations.Notification) error {
	a.disp.Notify(notify.Notification{Title: n.Title, Message: n.Message, Severity: n.Severity, Source: n.Source, At: n.At})
	return nil
}

// reports passes a bridge's reports to the dispatcher and, so that
// automations see every device's state, to the automations engine; a
// bridge's description of a device also to Home Assistant's discovery.
type reports struct {
	*dispatcher.Dispatcher
	engine *automations.Engine
	ha     *homeAssistant
}

func (r reports) Capabilities(device string, caps *devices.Capabilities) {
	r.Dispatcher.Capabilities(device, caps)
	r.ha.capabilities(device, caps)
}

func (r reports) Report(device string, state map[string]any, retained bool) {
	r.Dispatcher.Report(device, state, retained)
	r.engine.DeviceState(device, state, retained)
}

// firstMatch returns the first of filters that matches name, "" if none.
func firstMatch(filters []string, name string) string {
	for _, f := range filters {
		if topic.Match(f, name) {
			return f
		}
	}
	return ""
}

// automationKeyFile, in the data directory, holds the key of the
// automations' op_ids (automations.Options.Key), hex-encoded.
const automationKeyFile = "automations.key"

// automationKeySize is the key's length in bytes.
const automationKeySize = 32

// automationKey returns the key of the automations' op_ids kept in
// dataDir, drawing it from random and writing it (mode 0600) on the
// first start. A file there that holds no key is an error: a new key
// would give an event redelivered after the restart a new op_id.
func automationKey(dataDir string, random io.Reader) ([]byte, error) {
	path := filepath.Join(dataDir, automationKeyFile)
	b, err := os.ReadFile(path)
	if err == nil {
		key, err := hex.DecodeString(strings.TrimSpace(string(b)))
		if err != nil || len(key) != automationKeySize {
			return nil, fmt.Errorf("%s: not a key of %d hex-encoded bytes; remove it to draw a new one (commands of events redelivered after the restart then get new op_ids)", path, automationKeySize)
		}
		return key, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("automations key: %w", err)
	}
	key := make([]byte, automationKeySize)
	if _, err := io.ReadFull(random, key); err != nil {
		return nil, fmt.Errorf("automations key: %w", err)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("automations key: %w", err)
	}
	if err := config.WriteFileAtomic(path, []byte(hex.EncodeToString(key)+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("automations key: %w", err)
	}
	return key, nil
}
