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
	// With either listener anonymous (which the config allows only
	// without principals of its own) a command may come from nobody in
	// particular, and everyone may command everything, as before
	// authentication was on by default.
	if cfg.Authentication() && !cfg.MQTT.AllowAnonymous && !cfg.HTTP.AllowAnonymous {
		g = make(map[string]devices.Grants, len(cfg.Principals))
		for _, p := range cfg.Principals {
			g[p.Name] = p.Allow
		}
	}
	a.grants.Store(&g)
}

// Authorize allows everything without principals or with a listener that
// allows anonymous clients; else it allows a
// command only from a principal whose grants name its action on its
// device (devices.Grants), or from a local automation.
func (a *authorizer) Authorize(principal string, dev devices.Device, target devices.Target) error {
	grants := *a.grants.Load()
	if grants == nil || principal == automationPrincipal {
		return nil
	}
	if principal == "" {
		return errors.New("the sender is not authenticated as a principal; commands come from a principal's MQTT login or HTTP bearer token (the generated principal default's, in the credentials file, when the config names none)")
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
	d.log.Info("principals and credentials reloaded", "principals", len(next.Principals), "mqtt_users", len(next.MQTT.Users))
	if changedBesidesPrincipals(d.cfg, next) {
		d.log.Warn("the configuration file changed beyond principals, mqtt.users and the services' passwords; those changes take effect at the next restart")
	}
}

// changedBesidesPrincipals reports whether b differs from a in anything
// but what reload applies.
func changedBesidesPrincipals(a, b *config.Config) bool {
	x, y := *a, *b
	x.Principals, y.Principals = nil, nil
	x.MQTT.Users, y.MQTT.Users = nil, nil
	x.GeneratedPrincipal, y.GeneratedPrincipal = false, false
	x.Services, y.Services = withoutPasswords(x.Services), withoutPasswords(y.Services)
	return !reflect.DeepEqual(x, y)
}

// withoutPasswords returns services without their MQTT passwords, which a
// reload applies.
func withoutPasswords(services []config.Service) []config.Service {
	out := make([]config.Service, len(services))
	for i, s := range services {
		s.MQTTPassword = ""
		out[i] = s
	}
	return out
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
	// The credentials file too: a password rotated with hearthctl
	// credentials rotate applies from here on, and the broker disconnects
	// whoever is still logged in with the old one.
	// The credentials of the data directory in use, whatever the file
	// says now (a new data_dir waits for a restart, and is warned of).
	dataDir := next.DataDir
	next.DataDir = d.cfg.DataDir
	path, added, err := credentials(next, d.random)
	next.DataDir = dataDir
	if err != nil {
		log.Error("configuration not reloaded; the running principals and credentials stay", "err", err)
		return
	}
	logAccounts(log, next, path, added)
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
