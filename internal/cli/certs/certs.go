// Package certs is the certs command: it writes development TLS
// certificates (package devcert), and refuses to without
// --allow-development.
package certs

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/acemq/acemq/devcert"
	"github.com/acemq/acemq/internal/cli"
	"github.com/spf13/cobra"
)

// Options are certs's flags and arguments, read by NewCmd's command.
type Options struct {
	cli.Invocation

	dir   string
	hosts []string
	allow bool
	json  bool
}

// certsRefusal explains why certs needs --allow-development.
const certsRefusal = `refusing to write certificates without --allow-development.

These are development certificates: a throw-away certificate authority and
keys written unencrypted, for a broker on your own machine or in a test. Every
certificate carries "` + devcert.Marker + `" in its
subject, and AceMQ refuses a broker presenting one unless the program
explicitly allows development certificates. They must never protect anything
real. Run again with --allow-development to say that is what you want.`

// NewCmd is the certs command. When runF is not nil it runs instead of
// the command's own Run, once the flags are read and valid.
func NewCmd(runF func(*Options) error) *cobra.Command {
	f := &Options{}
	cmd := &cobra.Command{
		Use:   "certs --dir D [--host h]... --allow-development",
		Short: "Write development TLS certificates (a CA, a server and a client certificate)",
		Long: `certs writes a development certificate authority, a server certificate for
the given hosts and a client certificate, all signed by that CA, as PEM files
into a directory (created if needed; existing files of the same names are
replaced). Keys are ECDSA P-256, unencrypted, mode 0600; certificates are
valid for a year.

It refuses to run without --allow-development. Every certificate carries
"` + devcert.Marker + `" in its subject, and AceMQ
refuses a broker presenting such a certificate unless the program allows
development certificates (rabbitmq.AllowDevelopmentCertificates), so a
development CA that leaks into a trust store cannot silently be used in
production.

Without --host the server certificate covers localhost, 127.0.0.1 and ::1.`,
		Example: `  acemq certs --dir ./tls --allow-development
  acemq certs --dir ./tls --host rabbit.local --host 10.0.0.5 --allow-development`,
		Args: cobra.NoArgs,
		RunE: cli.RunE(f, runF),
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dir, "dir", "", "directory to write the PEM files into")
	fl.StringArrayVar(&f.hosts, "host", nil, "host name or IP address for the server certificate (repeatable)")
	fl.BoolVar(&f.allow, "allow-development", false, "confirm that these are development certificates, never for production")
	fl.BoolVar(&f.json, "json", false, "print the paths written as one JSON object")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}

// certsJSON is what certs --json prints.
type certsJSON struct {
	Dir        string   `json:"dir"`
	Hosts      []string `json:"hosts"`
	CACert     string   `json:"caCert"`
	CAKey      string   `json:"caKey"`
	ServerCert string   `json:"serverCert"`
	ServerKey  string   `json:"serverKey"`
	ClientCert string   `json:"clientCert"`
	ClientKey  string   `json:"clientKey"`
}

// Validate refuses to go on without --allow-development or a --dir.
func (f *Options) Validate() error {
	if !f.allow {
		return cli.WithCode(cli.ExitFailure, refusal(certsRefusal))
	}
	if f.dir == "" {
		return cli.WithCode(cli.ExitFailure, errors.New("--dir is empty"))
	}
	return nil
}

// Run writes the certificates and prints where.
func (f *Options) Run() error {
	cmd := f.Cmd
	dir, err := filepath.Abs(f.dir)
	if err != nil {
		return cli.WithCode(cli.ExitFailure, err)
	}
	hosts := f.hosts
	if len(hosts) == 0 {
		hosts = devcert.DefaultHosts
	}
	files, err := devcert.Generate(dir, hosts)
	if err != nil {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("writing certificates into %s: %w", dir, err))
	}
	out := cmd.OutOrStdout()
	if f.json {
		b, err := cli.MarshalLine(certsJSON{Dir: files.Dir, Hosts: hosts, CACert: files.CACert, CAKey: files.CAKey,
			ServerCert: files.ServerCert, ServerKey: files.ServerKey, ClientCert: files.ClientCert, ClientKey: files.ClientKey})
		if err != nil {
			return err
		}
		_, err = out.Write(b)
		return err
	}
	fmt.Fprintf(out, `wrote DEVELOPMENT certificates (never for production) into %s:
  %-16s the certificate authority (trust it in development clients only)
  %-16s its key: keep it, or delete it once you have what you need
  %-16s the broker's certificate, for %s
  %-16s its key
  %-16s a client certificate, for brokers that ask for one
  %-16s its key

RabbitMQ (rabbitmq.conf):
  listeners.ssl.default = 5671
  ssl_options.cacertfile = %s
  ssl_options.certfile   = %s
  ssl_options.keyfile    = %s
  ssl_options.verify     = verify_peer
  ssl_options.fail_if_no_peer_cert = false

A Go program connects with amqps://… and
  acemq.WithTLS(rabbitmq.AllowDevelopmentCertificates(&tls.Config{RootCAs: pool}))
where pool holds %s; without AllowDevelopmentCertificates AceMQ refuses the broker.
`, files.Dir,
		filepath.Base(files.CACert), filepath.Base(files.CAKey), filepath.Base(files.ServerCert), strings.Join(hosts, ", "),
		filepath.Base(files.ServerKey), filepath.Base(files.ClientCert), filepath.Base(files.ClientKey),
		files.CACert, files.ServerCert, files.ServerKey, files.CACert)
	return nil
}

// refusal is an error whose text is a paragraph for the user.
type refusal string

func (r refusal) Error() string { return string(r) }
