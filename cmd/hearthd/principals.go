package main

import (
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync/atomic"

	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/devices"
)

// automationPrincipal is the principal of the commands of local
// automations: written by whoever writes the configuration file, so
// allowed every command.
const automationPrincipal = config.AutomationPrincipal

// authorizer is the dispatcher's Authorizer over the configured
// principals. set swaps them at once (on SIGHUP), so that a permission
// revoked stops even a command accepted before, at its next attempt.
type authorizer struct {
	grants atomic.Pointer[map[string]devices.Grants] // nil map: no principals, everyone may
}

func newAuthorizer(cfg *config.Config) *authorizer {
	a := &authorizer{}
	a.set(cfg)
	return a
}

// set takes the principals of cfg.
func (a *authorizer) set(cfg *config.Config) {
	var g map[string]devices.Grants
	if cfg.Authentication() {
		g = make(map[string]devices.Grants, len(cfg.Principals))
		for _, p := range cfg.Principals {
			g[p.Name] = p.Allow
		}
	}
	a.grants.Store(&g)
}

// Authorize allows everything without principals; with them, it allows a
// command only from a principal whose grants name its action on its
// device (devices.Grants), or from a local automation.
func (a *authorizer) Authorize(principal string, dev devices.Device, target devices.Target) error {
	grants := *a.grants.Load()
	if grants == nil || principal == automationPrincipal {
		return nil
	}
	if principal == "" {
		return errors.New("the sender is not authenticated; with principals configured, commands come from a principal's MQTT login or HTTP bearer token")
	}
	g, ok := grants[principal]
	if !ok {
		return fmt.Errorf("principal %q is not configured (any more)", principal)
	}
	if action := devices.Action(dev, target); !g.Allows(dev.ID, action) {
		return fmt.Errorf("principal %q may not %s %s (action %s)", principal, verb(action), dev.ID, action)
	}
	return nil
}

// reload applies the principals (and embedded broker users) of next, a
// configuration read again on SIGHUP, and says which other changes wait
// for a restart.
func (d *daemon) reload(next *config.Config) {
	d.authz.set(next)
	for _, hook := range d.onReload {
		hook(next)
	}
	d.log.Info("principals reloaded", "principals", len(next.Principals), "mqtt_users", len(next.MQTT.Users))
	if changedBesidesPrincipals(d.cfg, next) {
		d.log.Warn("the configuration file changed beyond principals and mqtt.users; those changes take effect at the next restart")
	}
}

// changedBesidesPrincipals reports whether b differs from a in anything
// but what reload applies.
func changedBesidesPrincipals(a, b *config.Config) bool {
	x, y := *a, *b
	x.Principals, y.Principals = nil, nil
	x.MQTT.Users, y.MQTT.Users = nil, nil
	return !reflect.DeepEqual(x, y)
}

// reloadFrom reads the configuration again with load and applies its
// principals; a file that no longer parses changes nothing, and its
// errors (file:line: key: problem) are logged.
func (d *daemon) reloadFrom(load func() (*config.Config, error), log *slog.Logger) {
	next, err := load()
	if err != nil {
		log.Error("configuration not reloaded; the running principals stay", "err", err)
		return
	}
	d.reload(next)
}

// verb says an action as a verb for a sentence: "turn on", "unlock".
func verb(action string) string {
	switch action {
	case devices.ActionOn, devices.ActionOff:
		return "turn " + action
	case devices.ActionSet:
		return "set"
	}
	return action
}
