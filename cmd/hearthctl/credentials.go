package main

import (
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/hearthd/hearth/config"
)

// credentials shows the accounts of hearthd's credentials file, rotates
// one, or prints a principal's token. It reads the file itself, not the
// API: it works while hearthd is stopped, and needs the rights of the user
// hearthd runs as.
//
//	hearthctl credentials [-data-dir DIR]                 every account, its secrets and what it is for
//	hearthctl credentials [-data-dir DIR] rotate NAME     new secrets for one account; then SIGHUP hearthd
//	hearthctl credentials [-data-dir DIR] token [NAME]    the http_token of principal NAME (default: default)
//
// NAME is a service's or a principal's name, or hearthd; services.NAME
// and principals.NAME say which when both have it.
func (c *cli) credentials(args []string) error {
	fs := flag.NewFlagSet("hearthctl credentials", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	dataDir := fs.String("data-dir", "data", "hearthd's data `directory` (data_dir), which holds "+config.CredentialsFileName)
	fs.Usage = func() {
		fmt.Fprintf(c.stderr, "usage: hearthctl credentials [-data-dir DIR] [rotate NAME | token [NAME]]\n\nflags:\n")
		fs.PrintDefaults()
	}
	// Flags may come before or after the positional words, as people
	// type them: rotate zigbee -data-dir /var/lib/hearth.
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			if err == flag.ErrHelp {
				return err
			}
			return errFlags
		}
		if fs.NArg() == 0 {
			break
		}
		rest, args = append(rest, fs.Arg(0)), fs.Args()[1:]
	}
	path := config.CredentialsPath(*dataDir)
	switch {
	case len(rest) == 0:
		return c.showCredentials(path)
	case rest[0] == "rotate" && len(rest) == 2:
		return c.rotate(path, rest[1])
	case rest[0] == "rotate":
		return usagef("rotate takes one account's name, such as zigbee or default")
	case rest[0] == "token" && len(rest) <= 2:
		name := config.DefaultPrincipal
		if len(rest) == 2 {
			name = strings.TrimPrefix(rest[1], "principals.")
		}
		cr, err := config.LoadCredentials(path)
		if err != nil {
			return notWritten(err)
		}
		p, ok := cr.Principal(name)
		if !ok {
			return fmt.Errorf("%s holds no principal %q", path, name)
		}
		fmt.Fprintln(c.stdout, p.HTTPToken)
		return nil
	}
	return usagef("unexpected argument %q (want rotate NAME or token [NAME])", rest[0])
}

// notWritten adds to a missing file's error that hearthd writes it.
func notWritten(err error) error {
	if strings.Contains(err.Error(), "no such file") {
		return fmt.Errorf("%w: hearthd writes it at its first start (is -data-dir hearthd's data_dir?)", err)
	}
	return err
}

func (c *cli) showCredentials(path string) error {
	cr, err := config.LoadCredentials(path)
	if err != nil {
		return notWritten(err)
	}
	fmt.Fprintf(c.stdout, "%s (mode 0600; rotate one: hearthctl credentials rotate NAME, then SIGHUP hearthd)\n\n", path)
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ACCOUNT\tUSERNAME\tPASSWORD\tHTTP TOKEN\tFOR")
	for _, s := range cr.Services {
		fmt.Fprintf(tw, "services.%s\t%s\t%s\t-\tthe MQTT login of service %s itself: its bridge's or its devices' MQTT user and password (hearthd's log at its start says where, per protocol)\n",
			s.Name, s.MQTTUsername, s.MQTTPassword, s.Name)
	}
	for _, p := range cr.Principals {
		fmt.Fprintf(tw, "principals.%s\t%s\t%s\t%s\tautomations that command devices: the MQTT login for <prefix>/<device>/set, and Authorization: Bearer <token> for the HTTP API and hearthctl\n",
			p.Name, p.MQTTUsername, p.MQTTPassword, p.HTTPToken)
	}
	if cr.HearthdPassword != "" {
		fmt.Fprintf(tw, "hearthd\t%s\t%s\t-\tHearth's own login to the external broker (mqtt.url)\n", config.InternalUsername, cr.HearthdPassword)
	}
	return tw.Flush()
}

// rotate draws new secrets for one account and writes the file back
// atomically.
func (c *cli) rotate(path, name string) error {
	cr, err := config.LoadCredentials(path)
	if err != nil {
		return notWritten(err)
	}
	secret := func() (string, error) { return config.NewSecret(c.random) }
	kind, bare, qualified := strings.Cut(name, ".")
	if !qualified {
		kind, bare = "", name
	}
	var rotated string
	switch {
	case (kind == "" || kind == "services") && hasService(cr, bare):
		for i := range cr.Services {
			if cr.Services[i].Name == bare {
				if cr.Services[i].MQTTPassword, err = secret(); err != nil {
					return err
				}
			}
		}
		rotated = "the MQTT password of services." + bare + ": give the service (its bridge) the new one"
	case (kind == "" || kind == "principals") && hasPrincipal(cr, bare):
		for i := range cr.Principals {
			if cr.Principals[i].Name == bare {
				if cr.Principals[i].MQTTPassword, err = secret(); err != nil {
					return err
				}
				if cr.Principals[i].HTTPToken, err = secret(); err != nil {
					return err
				}
			}
		}
		rotated = "the MQTT password and HTTP token of principals." + bare + ": give its automations the new ones"
	case kind == "" && bare == config.InternalUsername && cr.HearthdPassword != "":
		if cr.HearthdPassword, err = secret(); err != nil {
			return err
		}
		rotated = "Hearth's own password: set it in the external broker too (hearthd -print-mosquitto-acl)"
	default:
		return fmt.Errorf("%s holds no account %q (%s)", path, name, accountNames(cr))
	}
	if err := config.WriteCredentials(path, cr); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "Rotated %s (hearthctl credentials shows it).\nReload hearthd to apply it: kill -HUP <pid of that hearthd>, or systemctl reload hearthd. Until then the old secret still works; after it, clients still logged in with the old one are disconnected.\n", rotated)
	return nil
}

func hasService(cr *config.Credentials, name string) bool {
	_, ok := cr.Service(name)
	return ok
}

func hasPrincipal(cr *config.Credentials, name string) bool {
	_, ok := cr.Principal(name)
	return ok
}

// accountNames lists the accounts of cr for an error message.
func accountNames(cr *config.Credentials) string {
	var names []string
	for _, s := range cr.Services {
		names = append(names, "services."+s.Name)
	}
	for _, p := range cr.Principals {
		names = append(names, "principals."+p.Name)
	}
	if cr.HearthdPassword != "" {
		names = append(names, config.InternalUsername)
	}
	if len(names) == 0 {
		return "it holds none"
	}
	return "accounts: " + strings.Join(names, ", ")
}
