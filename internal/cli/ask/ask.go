// Package ask is the ask command: it sends a request through package rpc
// and prints the reply, exiting 2 when the responder failed, 3 on a timeout
// and 4 when the request was unroutable.
package ask

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/cli"
	"github.com/acemq/acemq/rpc"
	"github.com/spf13/cobra"
)

// Options are ask's flags and arguments, read by NewCmd's command.
type Options struct {
	cli.Invocation
	headerValue map[string]any // --header, parsed

	exchange, routingKey, typ, ct string
	headers                       []string
	timeout                       time.Duration
}

// NewCmd is the ask command. When runF is not nil it runs instead of
// the command's own Run, once the flags are read and valid.
func NewCmd(runF func(*Options) error) *cobra.Command {
	f := &Options{}
	cmd := &cobra.Command{
		Use:   "ask --exchange E --routing-key K [--timeout D] [--type T] [BODY | -]",
		Short: "Send a request and print the reply",
		Long: `ask publishes a request (mandatory, confirmed) naming a reply queue of its
own, waits for the answer and prints the reply body, byte for byte, on
standard output. The body is the BODY argument, or standard input when BODY
is - or absent; its content type is --content-type, or guessed as publish
does. Replies are printed whatever their content type.

Exit codes: 0 answered; 2 the responder failed or refused the request (its
error, "TypeName: message", is printed on standard error, saying which); 3
no reply within --timeout (the
request may still be queued, running or done: a timeout says no answer
arrived, not that nothing happened); 4 unroutable (nothing is bound for the
routing key); 1 anything else.`,
		Example: `  acemq ask --exchange "" --routing-key pricing '{"sku":"A-1"}'
  echo '{"sku":"A-1"}' | acemq ask --exchange "" --routing-key pricing --timeout 5s -`,
		Args: cobra.MaximumNArgs(1),
		RunE: cli.RunE(f, runF),
	}
	cli.AddBrokerFlags(cmd, cli.SharedURLDefault)
	cli.AddWaitFlag(cmd)
	fl := cmd.Flags()
	fl.StringVar(&f.exchange, "exchange", "", `exchange to send the request to ("" is the default exchange)`)
	fl.StringVar(&f.routingKey, "routing-key", "", "routing key (on the default exchange, the responder's queue)")
	fl.StringVar(&f.typ, "type", "", "envelope type (default: the routing key)")
	fl.StringVar(&f.ct, "content-type", "", "content type of the request (default: guessed from the body)")
	fl.StringArrayVar(&f.headers, "header", nil, "application header name=value (repeatable)")
	fl.DurationVar(&f.timeout, "timeout", rpc.DefaultTimeout, "how long to wait for the reply")
	_ = cmd.MarkFlagRequired("exchange")
	_ = cmd.MarkFlagRequired("routing-key")
	return cmd
}

// Validate checks the flags before anything is read or connected.
func (f *Options) Validate() error {
	if f.timeout <= 0 {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("--timeout must be positive, not %s", f.timeout))
	}
	headers, err := cli.ParseHeaders(f.headers)
	f.headerValue = headers
	return err
}

// Run sends the request and prints the reply.
func (f *Options) Run() error {
	cmd := f.Cmd
	body, err := cli.ReadBody(cmd, f.Args)
	if err != nil {
		return err
	}
	if f.ct == "" {
		f.ct = cli.GuessContentType(body)
	}
	env, err := acemq.NewEnvelope(acemq.Fields{Type: f.typ, Headers: f.headerValue})
	if err != nil {
		return cli.WithCode(cli.ExitFailure, err)
	}
	s, err := cli.OpenSession(cmd, "")
	if err != nil {
		return err
	}
	defer s.Close()

	octx, cancel := context.WithTimeout(cmd.Context(), cli.ConnectTimeout)
	req, err := rpc.Open[[]byte, []byte](octx, s.Conn, f.exchange, f.routingKey, rpc.WithCodec(cli.RawCodec{Type: f.ct}), rpc.WithTimeout(f.timeout))
	cancel()
	if err != nil {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("opening a requester: %w", err))
	}
	defer cli.CloseQuietly(req.Close)

	reply, err := req.Ask(cmd.Context(), body, rpc.WithEnvelope(env))
	if err != nil {
		var re *rpc.ResponderError
		var ue *driver.ReturnError
		switch {
		case errors.As(err, &re) && re.Refused:
			return cli.WithCode(cli.ExitResponder, fmt.Errorf("the responder refused the request: %s", re.Text))
		case errors.As(err, &re):
			return cli.WithCode(cli.ExitResponder, fmt.Errorf("the responder failed: %s", re.Text))
		case errors.As(err, &ue):
			return cli.WithCode(cli.ExitUnroutable, fmt.Errorf("unroutable: no queue is bound for exchange %q and routing key %q (%d %s); the request was not delivered%s", ue.Exchange, ue.RoutingKey, ue.Code, ue.Text, s.Hint()))
		case errors.Is(err, acemq.ErrNotFound):
			return cli.WithCode(cli.ExitFailure, fmt.Errorf("%w (declare the exchange first)%s", err, s.Hint()))
		case errors.Is(err, rpc.ErrTimeout):
			if cmd.Context().Err() != nil {
				return cli.WithCode(cli.ExitFailure, errors.New("interrupted while waiting for the reply"))
			}
			return cli.WithCode(cli.ExitTimeout, fmt.Errorf("no reply within %s (the request may still be queued, running or done)", f.timeout))
		}
		return cli.WithCode(cli.ExitFailure, err)
	}
	_, err = cmd.OutOrStdout().Write(reply)
	return err
}
